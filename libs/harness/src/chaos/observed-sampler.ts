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
 * line: state loaded and published, about to work), which engines answer `GET /health`, which of them
 * generated within `recentMs` by their own Prometheus counters (`GET /metrics`: requests running or
 * waiting, or more finished than at the last look), and when the job's ledger last recorded a completed
 * sample. An engine whose check times out still counts as up while it answered within `recentMs` (busy,
 * not dead); past that it is down, so a wedged engine is not counted for long. Reads the ledger
 * incrementally.
 */
export class ObservedSampler {
  readonly samples: ObservedSample[] = [];
  private timer?: NodeJS.Timeout;
  private offset = 0;
  private readonly readyPids = new Set<number>();
  private lastCompletedAt = 0;
  /** Engine URL → when it last answered its health check. */
  private readonly answeredAt = new Map<string, number>();
  /** Engine URL → when its counters last showed work, and its finished-request count then. */
  private readonly worked = new Map<string, { at: number; finished: number | null }>();
  /** Whether any engine ever exported its counters (a stand-in engine exports none). */
  private countersSeen = false;
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
      const [answers, counters] = await Promise.all([
        Promise.all(machines.map((m) => health(`${m.engineUrl}/health`))),
        Promise.all(machines.map((m) => engineCounters(`${m.engineUrl}/metrics`))),
      ]);
      let enginesUp = 0;
      let enginesGenerating = 0;
      machines.forEach((m, i) => {
        if (answers[i] === 'up') this.answeredAt.set(m.engineUrl, at);
        const up = answers[i] === 'up' || (answers[i] === 'slow' && at - (this.answeredAt.get(m.engineUrl) ?? -Infinity) <= this.recentMs);
        if (!up) return;
        enginesUp += 1;
        if (this.generated(m.engineUrl, counters[i], at)) enginesGenerating += 1;
      });
      const samplesFlowing = at - this.lastCompletedAt < this.recentMs;
      this.samples.push({ at, trainersUp, enginesUp, samplesFlowing, ...(this.countersSeen ? { enginesGenerating } : {}) });
    } finally {
      this.busy = false;
    }
  }

  /** Whether the engine did work within `recentMs`: requests in it now, or more finished than at its last look. */
  private generated(url: string, now: EngineCounters | null, at: number): boolean {
    const last = this.worked.get(url);
    if (now) {
      this.countersSeen = true;
      const before = last?.finished ?? null;
      // A restarted engine counts from 0 again: fewer than before, but some, is work since the restart.
      const finishedMore = now.finished !== null && before !== null && (now.finished > before || (now.finished < before && now.finished > 0));
      const working = now.inFlight > 0 || finishedMore;
      this.worked.set(url, { at: working ? at : (last?.at ?? -Infinity), finished: now.finished });
    }
    return at - (this.worked.get(url)?.at ?? -Infinity) <= this.recentMs;
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

interface EngineCounters {
  inFlight: number;
  finished: number | null;
}

const IN_FLIGHT = /^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})?\s+(\S+)/;
const FINISHED = /^vllm:request_success_total(?:\{[^}]*\})?\s+(\S+)/;

/** An engine's requests in flight and finished so far from its Prometheus metrics; null: none exported, or no answer within 800 ms. */
function engineCounters(url: string): Promise<EngineCounters | null> {
  return new Promise((done) => {
    const req = request(url, { method: 'GET', timeout: 800 }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return done(null);
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let gauges = false;
        let inFlight = 0;
        let finished: number | null = null;
        for (const line of Buffer.concat(chunks).toString('utf8').split('\n')) {
          const g = IN_FLIGHT.exec(line);
          const f = g ? null : FINISHED.exec(line);
          const value = Number((g ?? f)?.[1]);
          if (!Number.isFinite(value)) continue;
          if (g) {
            gauges = true;
            inFlight += value;
          } else finished = (finished ?? 0) + value;
        }
        done(gauges ? { inFlight, finished } : null);
      });
      res.on('error', () => done(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => done(null));
    req.end();
  });
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
