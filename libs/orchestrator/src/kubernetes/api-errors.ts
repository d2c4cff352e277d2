import { HttpError } from '@kubernetes/client-node';
import { OrchestratorError } from '../orchestrator';

const RETRIABLE_STATUS = new Set([408, 409, 429]);

/** The HTTP status of a Kubernetes API error, or undefined for anything else (a network failure). */
export function statusOf(error: unknown): number | undefined {
  return error instanceof HttpError ? error.statusCode : undefined;
}

/** 409/429/408/5xx and network failures are worth retrying; 401/403/422 and other 4xx will fail the same way again. */
export function toOrchestratorError(error: unknown, action: string): OrchestratorError {
  if (error instanceof OrchestratorError) return error;
  const status = statusOf(error);
  if (status !== undefined) {
    const body = (error as HttpError).body as { message?: string; reason?: string } | undefined;
    const detail = body?.message ?? body?.reason ?? '';
    const retriable = RETRIABLE_STATUS.has(status) || status >= 500;
    return new OrchestratorError(`kubernetes: ${action} failed with HTTP ${status}${detail ? `: ${detail}` : ''}`, retriable, { cause: error });
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    return new OrchestratorError(`kubernetes: ${action} failed: API server unreachable (${code})`, true, { cause: error });
  }
  return new OrchestratorError(`kubernetes: ${action} failed: ${error instanceof Error ? error.message : String(error)}`, false, { cause: error });
}
