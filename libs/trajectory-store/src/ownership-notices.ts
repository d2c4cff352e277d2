import { DataOf, RobustrlMessage } from '@robustrl/contracts';

type TurnNotice = DataOf<'TrajectoryTurnAppended'>;

/** The most turns one TrajectoryTurnsAppended carries (its schema's bound). */
export const MAX_TURNS_PER_NOTICE = 1_000;

/**
 * Ownership notices gathered for `lingerMs`, then sent as one TrajectoryTurnsAppended per job (at most
 * MAX_TURNS_PER_NOTICE turns each): the broker and the rollout pool's consumer handle one record for
 * many turns. In the order noted, so a trajectory's later owner is never announced before its earlier.
 */
export class OwnershipNotices {
  private pending = new Map<string, TurnNotice[]>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly toMessage: (jobId: string, turns: TurnNotice[]) => RobustrlMessage,
    private readonly send: (messages: RobustrlMessage[]) => void,
    private readonly lingerMs: number,
  ) {}

  note(jobId: string, turn: TurnNotice): void {
    let list = this.pending.get(jobId);
    if (!list) this.pending.set(jobId, (list = []));
    list.push(turn);
    if (list.length >= MAX_TURNS_PER_NOTICE) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), this.lingerMs);
      this.timer.unref();
    }
  }

  /** Send what is gathered now. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.pending.size === 0) return;
    const messages: RobustrlMessage[] = [];
    for (const [jobId, turns] of this.pending) {
      for (let i = 0; i < turns.length; i += MAX_TURNS_PER_NOTICE) messages.push(this.toMessage(jobId, turns.slice(i, i + MAX_TURNS_PER_NOTICE)));
    }
    this.pending = new Map();
    this.send(messages);
  }
}
