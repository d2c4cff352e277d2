/** What the bring-up wait needs of a service process (private-infra.ts's ServiceProcess). */
export interface StartingService {
  readonly name: string;
  /** How the process ended, or null while it runs. */
  readonly ended: string | null;
  start(): void;
  readinessAnswer(): Promise<{ status: number; body: string }>;
  logTail(lines?: number): string;
}

export interface ServicesReadyOptions {
  timeoutMs: number;
  /** Times one service may be started again after it ended during the wait. */
  maxRestarts?: number;
  everyMs?: number;
  progress?: (line: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const indent = (text: string) => text.replace(/^/gm, '    ');

/**
 * Waits until every service answers `/readyz` with 200. A service that ended while starting (a port
 * taken between choosing it and binding it, a broker that refused its first connection) is started
 * again, up to `maxRestarts` times, each time saying why. On a timeout, or a service that keeps
 * ending, the error names each service not ready with what its `/readyz` said, or why nothing
 * answered, and the end of its log — a campaign's log folder is gone once a test cleans up.
 */
export async function awaitServicesReady(services: readonly StartingService[], options: ServicesReadyOptions): Promise<void> {
  const { timeoutMs, maxRestarts = 2, everyMs = 500, progress = () => undefined } = options;
  const deadline = Date.now() + timeoutMs;
  const restarts = new Map<string, number>();
  for (;;) {
    for (const s of services) {
      if (s.ended === null) continue;
      const n = restarts.get(s.name) ?? 0;
      if (n >= maxRestarts) throw new Error(`${s.name} ended while starting (${s.ended}), ${n + 1} times; its log ends:\n${indent(s.logTail())}`);
      progress(`${s.name} ended while starting (${s.ended}); starting it again. Its log ends:\n${indent(s.logTail(8))}`);
      restarts.set(s.name, n + 1);
      s.start();
    }
    const answers = await Promise.all(services.map((s) => s.readinessAnswer()));
    if (answers.every((a) => a.status === 200)) return;
    if (Date.now() > deadline) {
      const waiting = services
        .map((s, i) => ({ s, a: answers[i]! }))
        .filter(({ a }) => a.status !== 200)
        .map(({ s, a }) => `  ${s.name}: ${a.status ? `/readyz ${a.status} ${a.body}` : `no answer (${a.body})`}\n  its log ends:\n${indent(s.logTail())}`);
      throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for every service ready; not ready:\n${waiting.join('\n')}`);
    }
    await sleep(everyMs);
  }
}
