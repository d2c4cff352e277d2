import type { AgentConfig } from './agent-config';
import { RobustrlError } from '@robustrl/bus';

/** The kept batch cannot be fetched now (no request manager configured, or it did not answer): a 503 with why. */
export class KeptBatchUnavailableError extends RobustrlError {}

/**
 * The kept batch of a restart, from the request manager: its completed trajectories within the
 * staleness bound the trainer gives, with their turns (paper §5.1.2: the retried step keeps its batch).
 */
export async function fetchKeptBatch(
  config: Pick<AgentConfig, 'jobId' | 'requestManagerUrl' | 'requestManagerToken'>,
  batchId: string,
  query: { currentWeightVersion: number; maxStaleness: number },
): Promise<unknown> {
  if (!config.requestManagerUrl) throw new KeptBatchUnavailableError('ROBUSTRL_REQUEST_MANAGER_URL is not set on this agent: it cannot fetch the kept batch');
  const url =
    `${config.requestManagerUrl.replace(/\/+$/, '')}/v1/jobs/${encodeURIComponent(config.jobId)}/batches/${encodeURIComponent(batchId)}/completed` +
    `?currentWeightVersion=${query.currentWeightVersion}&maxStaleness=${query.maxStaleness}`;
  let res: Response;
  try {
    res = await fetch(url, {
      signal: AbortSignal.timeout(30_000),
      ...(config.requestManagerToken ? { headers: { authorization: `Bearer ${config.requestManagerToken}` } } : {}),
    });
  } catch (err) {
    throw new KeptBatchUnavailableError(`the request manager did not answer (${String(err)}): try again`);
  }
  const text = await res.text();
  if (!res.ok) throw new KeptBatchUnavailableError(`the request manager answered ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as unknown;
}
