import { awaitServicesReady, StartingService } from './services-ready';

/** A service whose readiness follows a script: each poll takes the next answer, the last one repeats. */
class Scripted implements StartingService {
  ended: string | null = null;
  starts = 0;
  private polls = 0;
  constructor(
    readonly name: string,
    private readonly answers: Array<number | 'ends'>,
  ) {}
  start(): void {
    this.starts += 1;
    this.ended = null;
  }
  async readinessAnswer() {
    const next = this.answers[Math.min(this.polls++, this.answers.length - 1)]!;
    if (next === 'ends') {
      this.ended = 'exit code 1';
      return { status: 0, body: 'connect ECONNREFUSED' };
    }
    return { status: next, body: next === 200 ? '{"ready":true}' : '{"ready":false,"bus":{"reachable":false}}' };
  }
  logTail(): string {
    return `Error: listen EADDRINUSE (${this.name})`;
  }
}

describe('awaitServicesReady', () => {
  it('returns once every service answers 200', async () => {
    const services = [new Scripted('detector', [503, 200]), new Scripted('controller', [200])];
    await awaitServicesReady(services, { timeoutMs: 1_000, everyMs: 1 });
    expect(services.map((s) => s.starts)).toEqual([0, 0]);
  });

  it('starts a service that ended while starting again, saying why', async () => {
    const lines: string[] = [];
    const detector = new Scripted('detector', ['ends', 200]);
    await awaitServicesReady([detector], { timeoutMs: 1_000, everyMs: 1, progress: (l) => lines.push(l) });
    expect(detector.starts).toBe(1);
    expect(lines.join('\n')).toMatch(/detector ended while starting \(exit code 1\).*\n.*EADDRINUSE/);
  });

  it('gives up on a service that keeps ending, with its log', async () => {
    const detector = new Scripted('detector', ['ends']);
    await expect(awaitServicesReady([detector], { timeoutMs: 1_000, everyMs: 1, maxRestarts: 2 })).rejects.toThrow(
      /detector ended while starting \(exit code 1\), 3 times; its log ends:\n.*EADDRINUSE/,
    );
    expect(detector.starts).toBe(2);
  });

  it('names each service not ready when the time is up, with what /readyz said and its log', async () => {
    const services = [new Scripted('detector', [200]), new Scripted('controller', [503])];
    const error = await awaitServicesReady(services, { timeoutMs: 20, everyMs: 5 }).catch((e: Error) => e);
    expect(error).toBeInstanceOf(Error);
    const message = (error as Error).message;
    expect(message).toMatch(/timed out after 0 s waiting for every service ready; not ready:\n {2}controller: \/readyz 503 .*reachable":false/);
    expect(message).toContain('EADDRINUSE (controller)');
    expect(message).not.toContain('detector');
  });
});
