/**
 * The error family of the facade (C++: errors.cc). Native errors carry `ucxKind` ("unavailable" |
 * "peer" | "closed" | "timeout" | "cuda" | "ucx"), `code` (the ucs_status_t name, e.g.
 * "UCS_ERR_CONNECTION_RESET") and `status` (its number); mapError turns them into the classes below.
 */
export class UcxError extends Error {
  /** ucs_status_t name (e.g. "UCS_ERR_CONNECTION_RESET"), or "UCX_ERROR" / "UCX_UNAVAILABLE". */
  readonly code: string;
  /** numeric ucs_status_t (0 when not from UCX) */
  readonly status: number;
  constructor(message: string, code = 'UCX_ERROR', status = 0, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}
/** The addon was built without UCX (stub) or failed to load. */
export class UcxUnavailableError extends UcxError {}
/** Connection failed or the peer died / became unreachable (UCX endpoint error handler fired). */
export class PeerUnreachableError extends UcxError {}
/** The endpoint (or worker) was closed, or the operation was issued on a failed endpoint. */
export class EndpointClosedError extends UcxError {}
/** The per-operation timeout elapsed. RMA/send timeouts also force-close the endpoint. */
export class TimeoutError extends UcxError {}
/**
 * A CUDA driver call failed (code: the CUresult's name, e.g. "CUDA_ERROR_INVALID_VALUE"). Without a
 * usable driver the error is a UcxUnavailableError with code "CUDA_UNAVAILABLE".
 */
export class CudaError extends UcxError {}

export function mapError(e: unknown): Error {
  // Not `instanceof Error`: an error the addon made belongs to the realm that loaded it (jest runs
  // tests in a realm of their own), and it must keep its kind and code there too.
  if (typeof e !== 'object' || e === null || typeof (e as Error).message !== 'string') return new UcxError(String(e));
  const n = e as Error & { ucxKind?: string; code?: string; status?: number };
  if (n.ucxKind === undefined) return n; // TypeError / RangeError from argument checks
  const args: [string, string, number, { cause: unknown }] = [n.message, n.code ?? 'UCX_ERROR', n.status ?? 0, { cause: e }];
  switch (n.ucxKind) {
    case 'unavailable':
      return new UcxUnavailableError(...args);
    case 'peer':
      return new PeerUnreachableError(...args);
    case 'closed':
      return new EndpointClosedError(...args);
    case 'timeout':
      return new TimeoutError(...args);
    case 'cuda':
      return new CudaError(...args);
    default:
      return new UcxError(...args);
  }
}
export async function wrap<T>(p: () => Promise<T>): Promise<T> {
  try {
    return await p();
  } catch (e) {
    throw mapError(e);
  }
}
export function wrapSync<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw mapError(e);
  }
}
