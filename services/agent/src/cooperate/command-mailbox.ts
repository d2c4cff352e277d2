/**
 * Commands handed to a framework that owns its processes (the agent's *cooperate* mode,
 * docs/integrators/integrate-your-job.md): the agent does not restart anything itself; it offers each machine command to
 * the framework, which follows them over the local API (`GET /v1/commands`, a long poll), acknowledges
 * each by its id, carries it out and reports the outcome.
 *
 * - Delivery is at least once: a command is offered again on every poll until it is acknowledged (or
 *   answered, which acknowledges it), so a framework that crashed between a poll and its
 *   acknowledgement sees it again when it polls after its restart.
 * - An outcome settles the command once; the same outcome again is a no-op (a retried request), a
 *   different one is refused. A command nobody answers stays open: the controller's command timeout and
 *   escalation rules apply to it as to any unanswered command.
 * - A stop notice (the machine's trainer fenced out by a newer group, or its lease on the broker lost)
 *   asks the framework to stop its role and expects no outcome; acknowledging it is enough.
 * - The framework counts as attached while a poll is waiting or ended within `attachedForMs`: the agent
 *   vouches for the role (answers heartbeat probes) only then.
 *
 * No I/O and no timers but the poll's wait; the clock is given.
 */
export interface FrameworkCommand {
  commandId: string;
  /** The controller's command, or a stop notice of the agent's own. */
  type: 'RestartTrainerGroup' | 'RestartRolloutEngine' | 'PromoteRolloutToTrainer' | 'StopRole';
  /** The recovery it belongs to (absent on a stop notice). */
  recoveryId?: string;
  /** What the framework needs to carry it out: see `frameworkCommandOf`. */
  [detail: string]: unknown;
}

export type CommandOutcome = { ok: true } | { ok: false; error: string };

export type AnswerResult = 'settled' | 'already-settled' | 'conflicts' | 'unknown';

interface Entry {
  command: FrameworkCommand;
  acknowledged: boolean;
  settle: ((outcome: CommandOutcome) => void) | null;
}

/** How many settled commands are remembered, so a retried answer is recognised. */
const REMEMBERED = 1_000;

export class CommandMailbox {
  private readonly open = new Map<string, Entry>();
  private readonly settled = new Map<string, CommandOutcome>();
  private readonly waiting = new Set<() => void>();
  private polls = 0;
  private lastPollAt: number | null = null;
  private closedWith: string | null = null;

  constructor(
    private readonly attachedForMs = 45_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Offers a command the controller waits on; resolves with the framework's outcome (never, if it gives none). */
  offer(command: FrameworkCommand): Promise<CommandOutcome> {
    if (this.closedWith !== null) return Promise.resolve({ ok: false, error: this.closedWith });
    const done = this.settled.get(command.commandId);
    if (done) return Promise.resolve(done);
    return new Promise((resolve) => {
      const known = this.open.get(command.commandId);
      if (known) {
        const previous = known.settle;
        known.settle = (o) => (previous?.(o), resolve(o));
        return;
      }
      this.open.set(command.commandId, { command, acknowledged: false, settle: resolve });
      this.wake();
    });
  }

  /** Offers a notice that expects no outcome (a stop): gone once acknowledged. */
  notify(command: FrameworkCommand): void {
    if (this.closedWith !== null || this.open.has(command.commandId)) return;
    this.open.set(command.commandId, { command, acknowledged: false, settle: null });
    this.wake();
  }

  /** The commands not acknowledged yet, oldest first; with none, waits up to `waitMs` for one. */
  async poll(waitMs: number): Promise<FrameworkCommand[]> {
    this.polls += 1;
    try {
      if (this.pending().length === 0 && waitMs > 0 && this.closedWith === null) {
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            this.waiting.delete(done);
            resolve();
          };
          const timer = setTimeout(done, waitMs);
          this.waiting.add(done);
        });
      }
      return this.pending();
    } finally {
      this.polls -= 1;
      this.lastPollAt = this.now();
    }
  }

  /** The framework has the command: it is not offered again. */
  acknowledge(commandId: string): 'acknowledged' | 'already-settled' | 'unknown' {
    const entry = this.open.get(commandId);
    if (!entry) return this.settled.has(commandId) ? 'already-settled' : 'unknown';
    entry.acknowledged = true;
    // A notice is done once the framework has it.
    if (entry.settle === null) this.open.delete(commandId);
    return 'acknowledged';
  }

  /** The framework's outcome; settles the command once. */
  answer(commandId: string, outcome: CommandOutcome): AnswerResult {
    const before = this.settled.get(commandId);
    if (before) return sameOutcome(before, outcome) ? 'already-settled' : 'conflicts';
    const entry = this.open.get(commandId);
    if (!entry) return 'unknown';
    this.open.delete(commandId);
    this.remember(commandId, outcome);
    entry.settle?.(outcome);
    return 'settled';
  }

  /** Whether a framework follows the commands: a poll waiting, or one ended within `attachedForMs`. */
  attached(): boolean {
    return this.polls > 0 || (this.lastPollAt !== null && this.now() - this.lastPollAt <= this.attachedForMs);
  }

  /** Commands offered and not answered (the agent's status shows them). */
  openCommands(): Array<{ commandId: string; type: FrameworkCommand['type']; acknowledged: boolean }> {
    return [...this.open.values()].map((e) => ({ commandId: e.command.commandId, type: e.command.type, acknowledged: e.acknowledged }));
  }

  /** The agent stops: open commands fail with `reason`, waiting polls return. */
  close(reason: string): void {
    this.closedWith = reason;
    for (const [id, entry] of this.open) {
      this.open.delete(id);
      entry.settle?.({ ok: false, error: reason });
    }
    this.wake();
  }

  private pending(): FrameworkCommand[] {
    return [...this.open.values()].filter((e) => !e.acknowledged).map((e) => e.command);
  }

  private wake(): void {
    for (const w of [...this.waiting]) w();
  }

  private remember(commandId: string, outcome: CommandOutcome): void {
    this.settled.set(commandId, outcome);
    if (this.settled.size > REMEMBERED) this.settled.delete(this.settled.keys().next().value as string);
  }
}

const sameOutcome = (a: CommandOutcome, b: CommandOutcome) => a.ok === b.ok && (a.ok || b.ok || a.error === b.error);
