import { OrchestratorError } from './orchestrator';

/** Bounds in-memory idempotency records; an operation is only redelivered shortly after it ran. */
export const MAX_REMEMBERED_OPERATIONS = 10_000;

export type OperationKind = 'isolateMachine' | 'requestMachine' | 'releaseMachine' | 'restartMachines' | 'restartTask';

/** A Map that forgets its oldest entries beyond `limit` (insertion order). */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly limit: number) {
    super();
  }

  override set(key: K, value: V): this {
    super.set(key, value);
    while (this.size > this.limit) this.delete(this.keys().next().value as K);
    return this;
  }
}

/**
 * The idempotency both orchestrator adapters promise (see the port): an operation runs at most once
 * per operation id, a repeat returns the first result, concurrent duplicates share the first call,
 * and a failed operation is not remembered (so a retry really retries). An id reused for another
 * kind of operation is a caller bug and refused.
 */
export class OperationMemo {
  private readonly completed = new BoundedMap<string, { kind: OperationKind; result: unknown }>(MAX_REMEMBERED_OPERATIONS);
  private readonly inFlight = new Map<string, { kind: OperationKind; promise: Promise<unknown> }>();

  async once<T>(operationId: string, kind: OperationKind, run: () => Promise<T>): Promise<T> {
    const previous = this.completed.get(operationId) ?? this.inFlight.get(operationId);
    if (previous) {
      if (previous.kind !== kind) {
        throw new OrchestratorError(`operation ${operationId} was already used for ${previous.kind}, not ${kind}`, false);
      }
      return 'promise' in previous ? ((await previous.promise) as T) : (previous.result as T);
    }
    const promise = run();
    this.inFlight.set(operationId, { kind, promise });
    try {
      const result = await promise;
      this.completed.set(operationId, { kind, result });
      return result;
    } finally {
      this.inFlight.delete(operationId);
    }
  }
}
