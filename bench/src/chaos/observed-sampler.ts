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
 * recorded a completed sample. Reads the ledger incrementally.
 */
export class ObservedSampler {
  readonly samples: ObservedSample[] = [];
  private timer?: NodeJS.Timeout;
  private offset = 0;
  private readonly readyPids = new Set<number>();
  private lastCompletedAt = 0;
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
      const engines = await Promise.all(machines.map((m) => healthy(`${m.engineUrl}/health`)));
      this.samples.push({ at, trainersUp, enginesUp: engines.filter(Boolean).length, samplesFlowing: at - this.lastCompletedAt < this.recentMs });
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

function healthy(url: string): Promise<boolean> {
  return new Promise((done) => {
    const req = request(url, { method: 'GET', timeout: 800 }, (res) => {
      res.resume();
      done(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => done(false));
    req.end();
  });
}
