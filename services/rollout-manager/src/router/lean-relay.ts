import type { EngineView } from './engine-pool';
import type { ContinuationPlan, EngineAdapter } from './engines/engine-adapter';
import type { Answer } from './request-context';
import { Api, Json, StreamSplice } from './stream-splice';
import { streamAnswer } from './stream-answer';

/**
 * The lean path of a stream nobody records (docs/router.md "The lean path"): each event goes to the
 * caller as the engine sent it, less the id lists the router asked for (cut from its text by the
 * adapter's `leanEvent`), and is kept unparsed. The splice, which a failover continues from, reads the
 * kept events only when it is needed: when the engine fails, or an event needs the full path (a tool
 * call, an error, a shape the adapter does not read as text). Then the relay settles and the stream
 * goes on the full way. A stream that ends on the lean path was never parsed.
 */
export class LeanRelay {
  private held: string[] = [];
  private ids = 0;
  private settled = false;

  private constructor(
    private readonly adapter: EngineAdapter & Required<Pick<EngineAdapter, 'leanEvent'>>,
    private readonly caller: { api: Api; body: Json },
    private readonly splice: StreamSplice,
  ) {}

  /**
   * A relay for this attempt, or null where the stream must take the full path: the answer is recorded
   * (the record needs every chunk read), output was already forwarded (a continuation's chunks are
   * rewritten to the first stream's id), the engine answers in another shape than the caller's, more
   * than one choice is asked for, or the adapter has no lean reading.
   */
  static of(caller: { api: Api; body: Json; beforeAnswer?: unknown }, plan: ContinuationPlan, adapter: EngineAdapter, splice: StreamSplice): LeanRelay | null {
    if (caller.beforeAnswer !== undefined || splice.started || plan.translate || plan.answersAs !== caller.api) return null;
    if (typeof caller.body.n === 'number' && caller.body.n > 1) return null;
    if (!adapter.leanEvent) return null;
    return new LeanRelay(adapter as EngineAdapter & Required<Pick<EngineAdapter, 'leanEvent'>>, caller, splice);
  }

  /** Still on the lean path. */
  get active(): boolean {
    return !this.settled;
  }

  /** One event's data in: what the caller gets, or null when it needs the full path (the relay has settled). */
  accept(data: string): string | null {
    const event = this.adapter.leanEvent(data, this.caller);
    if (event === null) {
      this.settle();
      return null;
    }
    this.held.push(data);
    this.ids += event.ids;
    return event.forward;
  }

  /**
   * The splice reads the kept events, as if it had seen each one (what it would forward is already
   * with the caller). An event that is not JSON was forwarded as the engine sent it and is skipped.
   */
  settle(): void {
    if (this.settled) return;
    this.settled = true;
    for (const data of this.held) {
      let chunk: Json;
      try {
        chunk = JSON.parse(data) as Json;
      } catch {
        continue;
      }
      this.splice.accept(chunk, this.adapter.read(this.caller.api, chunk));
    }
    this.held = [];
  }

  /**
   * The answer of a stream that ended on the lean path: its tokens are the ids relayed; what it says
   * (content, finish reason, spans) is read from the kept events only if someone asks. No tool call
   * can be in it: an event with one takes the full path.
   */
  answer(engines: EngineView[]): Answer {
    const read = () => {
      this.settle();
      return streamAnswer(this.caller.api, this.splice);
    };
    return {
      tokens: this.ids,
      engines,
      toolCalls: false,
      get content() {
        return read().content;
      },
      get finishReason() {
        return read().finishReason;
      },
      get spans() {
        return read().spans;
      },
    };
  }
}
