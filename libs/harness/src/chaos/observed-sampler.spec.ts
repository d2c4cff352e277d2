import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ObservedSampler } from './observed-sampler';

/** An engine stand-in whose `/health` answers 200 or, once wedged, never answers. */
async function engine(): Promise<{ url: string; wedge(): void; close(): Promise<void>; server: Server }> {
  let wedged = false;
  const server = createServer((_req, res) => {
    if (!wedged) res.end('ok');
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    wedge: () => (wedged = true),
    close: () => new Promise<void>((done) => (server.closeAllConnections(), server.close(() => done()))),
  };
}

async function closedPort(): Promise<string> {
  const e = await engine();
  await e.close();
  return e.url;
}

describe('the process sampler', () => {
  it('counts a slow engine as up while it answered recently, a refused one as down at once, a wedged one down after the window', async () => {
    const busy = await engine();
    const dead = await closedPort();
    const sampler = new ObservedSampler(
      mkdtempSync(join(tmpdir(), 'sampler-')),
      () => [
        { machineId: 'rollout-0', agentPid: undefined, engineUrl: busy.url },
        { machineId: 'rollout-1', agentPid: undefined, engineUrl: dead },
      ],
      1_500,
    );
    try {
      await sampler.stop(); // one sample, taken now
      busy.wedge();
      await sampler.stop(); // times out: answered within the window
      await new Promise((done) => setTimeout(done, 1_600));
      await sampler.stop(); // times out, its last answer too old
      expect(sampler.samples.map((s) => s.enginesUp)).toEqual([1, 1, 0]);
      expect(sampler.samples.every((s) => s.trainersUp === 0 && !s.samplesFlowing)).toBe(true);
    } finally {
      await busy.close();
    }
  });

  it("tells the engines that generate from those that only serve, by each engine's own counters", async () => {
    // vLLM's metrics as /metrics exposes them: requests running and waiting, and finished so far.
    const metrics = { running: 0, finished: 7 };
    const working = createServer((req, res) =>
      res.end(
        req.url === '/metrics'
          ? `# HELP x\nvllm:num_requests_running{model_name="m"} ${metrics.running}\nvllm:num_requests_waiting{model_name="m"} 0\nvllm:request_success_total{finished_reason="stop",model_name="m"} ${metrics.finished}\n`
          : 'ok',
      ),
    );
    await new Promise<void>((done) => working.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(working.address() as AddressInfo).port}`;
    const idle = await engine();
    const sampler = new ObservedSampler(
      mkdtempSync(join(tmpdir(), 'sampler-')),
      () => [
        { machineId: 'rollout-0', agentPid: undefined, engineUrl: url },
        { machineId: 'rollout-1', agentPid: undefined, engineUrl: idle.url },
      ],
      1_500,
    );
    try {
      await sampler.stop(); // first look: nothing running, the count only read
      metrics.running = 2;
      await sampler.stop(); // running requests
      metrics.running = 0;
      metrics.finished = 9;
      await sampler.stop(); // none running, but two finished since
      await new Promise((done) => setTimeout(done, 1_600));
      await sampler.stop(); // nothing for longer than the window
      metrics.finished = 1;
      await sampler.stop(); // restarted: its count starts again, and one finished since
      // rollout-1 exports no counters: it is up, and never counted as generating.
      expect(sampler.samples.map((s) => [s.enginesUp, s.enginesGenerating])).toEqual([
        [2, 0],
        [2, 1],
        [2, 1],
        [2, 0],
        [2, 1],
      ]);
    } finally {
      await idle.close();
      await new Promise<void>((done) => (working.closeAllConnections(), working.close(() => done())));
    }
  });
});
