import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { descendantsOf } from '@robustrl/agent';
import { ObservedSample } from './observed-ettr';

/** What the sampler looks at each second: the job's running machines, with their agent's pid and engine URL. */
export interface ObservedMachine {
  machineId: string;
  agentPid: number | undefined;
  engineUrl: string;
}

/**
 * Takes an `ObservedSample` every second (observed-ettr.ts) from the processes themselves: which
 * trainer ranks are alive and loaded (a pid below a running machine's agent that wrote its `ready`
 * line: state loaded and published, about to work), which engines answer `GET /health`, and when the job's ledger last
 * recorded a completed sample. An engine whose check times out still counts as up while it answered
 * within `recentMs` (busy, not dead); past that it is down, so a wedged engine is not counted for long.
 * Reads the ledger incrementally.
 */
export class ObservedSampler {
  readonly samples: ObservedSample[] = [];
  private timer?: NodeJS.Timeout;
  private offset = 0;
  private readonly readyPids = new Set<number>();
  private lastCompletedAt = 0;
  /** Engine URL → when it last answered its health check. */
  private readonly answeredAt = new Map<string, number>();
  private busy = false;

  constructor(
    private readonly stateDir: string,
    private readonly machines: () => ObservedMachine[],
    private readonly recentMs = 10_000,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.sample(), 1_000);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sample(true);
  }

  private async sample(force = false): Promise<void> {
    if (this.busy && !force) return;
    this.busy = true;
    try {
      this.readLedger();
      const machines = this.machines();
      const at = Date.now();
      let trainersUp = 0;
      for (const m of machines) {
        if (m.agentPid === undefined) continue;
        trainersUp += descendantsOf(m.agentPid).filter((pid) => this.readyPids.has(pid)).length;
      }
      const answers = await Promise.all(machines.map((m) => health(`${m.engineUrl}/health`)));
      let enginesUp = 0;
      machines.forEach((m, i) => {
        if (answers[i] === 'up') this.answeredAt.set(m.engineUrl, at);
        if (answers[i] === 'up' || (answers[i] === 'slow' && at - (this.answeredAt.get(m.engineUrl) ?? -Infinity) <= this.recentMs)) enginesUp += 1;
      });
      this.samples.push({ at, trainersUp, enginesUp, samplesFlowing: at - this.lastCompletedAt < this.recentMs });
    } finally {
      this.busy = false;
    }
  }

  private readLedger(): void {
    const path = join(this.stateDir, 'ledger.jsonl');
    if (!existsSync(path)) return;
    const size = statSync(path).size;
    if (size <= this.offset) return;
    const fd = openSync(path, 'r');
    const buffer = Buffer.alloc(size - this.offset);
    try {
      readSync(fd, buffer, 0, buffer.length, this.offset);
    } finally {
      closeSync(fd);
    }
    const text = buffer.toString('utf8');
    const whole = text.lastIndexOf('\n') + 1; // a line being written is read next time
    this.offset += Buffer.byteLength(text.slice(0, whole));
    for (const line of text.slice(0, whole).split('\n')) {
      if (!line.trim()) continue;
      try {
        const r = JSON.parse(line) as { kind?: string; pid?: number; rank?: number; at?: number };
        if (r.pid && r.kind === 'ready') this.readyPids.add(r.pid);
        if (r.kind === 'completed' && r.at) this.lastCompletedAt = Math.max(this.lastCompletedAt, r.at * (r.at < 1e12 ? 1000 : 1));
      } catch {
        // a torn line
      }
    }
  }
}

/**
 * `slow`: the check timed out, the engine's socket open. On shared cores an engine's `/health` can wait
 * behind a training step for seconds while it generates; a refused connection or an error answer is
 * `down` at once.
 */
function health(url: string): Promise<'up' | 'slow' | 'down'> {
  return new Promise((done) => {
    let timedOut = false;
    const req = request(url, { method: 'GET', timeout: 800 }, (res) => {
      res.resume();
      done(res.statusCode === 200 ? 'up' : 'down');
    });
    req.on('timeout', () => {
      timedOut = true;
      req.destroy();
    });
    req.on('error', () => done(timedOut ? 'slow' : 'down'));
    req.end();
  });
}
