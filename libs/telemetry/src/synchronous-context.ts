import { Context, ContextManager, ROOT_CONTEXT } from '@opentelemetry/api';

/**
 * An OpenTelemetry context manager that follows synchronous calls only: `with(ctx, fn)` makes `ctx`
 * active while `fn` runs and restores the previous context when it returns. Code after an `await`
 * sees the root context, never another request's: continuations run once the stack has unwound, and
 * every `with` has restored its predecessor by then.
 *
 * Why: the async manager (AsyncLocalStorage) makes Node run a hook on every promise of the process once
 * it is first used, and a request the router records creates dozens of promises: 2–13 % of the router's
 * CPU with recording on, depending on the run (docs/benchmarks.md "The router on every request"). A process that
 * chooses this manager carries trace context explicitly where it crosses an `await`: decisions stamp
 * it into their outputs' envelopes inside a synchronous span (decision-steps.ts), a command executor
 * captures it when the command arrives (command-executor.ts), and a publish reads it before its first
 * `await` (outbound.ts). docs/operators/observability.md says which services use it.
 */
export class SynchronousContextManager implements ContextManager {
  private current: Context = ROOT_CONTEXT;

  active(): Context {
    return this.current;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(context: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    const previous = this.current;
    this.current = context;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.current = previous;
    }
  }

  bind<T>(context: Context, target: T): T {
    if (typeof target !== 'function') return target;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const manager = this;
    const fn = target as unknown as (...args: unknown[]) => unknown;
    return function (this: unknown, ...args: unknown[]) {
      return manager.with(context, () => fn.apply(this, args));
    } as unknown as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.current = ROOT_CONTEXT;
    return this;
  }
}
