import { randomBytes } from 'node:crypto';
import { MessageBus, Subscription } from '@robustrl/bus';
import { createMessage, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { DetectorModule } from '@robustrl/detector';
import { RouterRuntime } from '@robustrl/rollout-manager';
import { MESSAGE_BUS, RunningService, runService } from '@robustrl/service-kit';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { eventually } from '@robustrl/testing/eventually';
import { LlamaEngine, startLlamaEngines } from '@robustrl/harness';

/**
 * A wedged engine found from the router's evidence, end to end: the rollout manager's router
 * (RouterRuntime, as deployed) in front of two real llama.cpp servers publishes each engine's request
 * evidence on the real Kafka broker; the real detector service consumes it. One engine is SIGSTOPped
 * under load while the machines' "agents" keep reporting GPU activity — the machine lives, the engine
 * hangs — and the detector confirms that engine's machine, by the rollout-requests rule, within seconds
 * of the stall window; the other machine is never confirmed.
 */
jest.setTimeout(120_000);

describe('a hung engine is confirmed from the router’s evidence (real Kafka, PostgreSQL, llama.cpp)', () => {
  const topicPrefix = `e2e-wedge-${randomBytes(4).toString('hex')}.`;
  const brokers = (process.env.KAFKA_BROKERS ?? '').split(',');
  const jobId = `job-wedge-${randomBytes(3).toString('hex')}`;
  let database: { url: string; drop(): Promise<void> };
  let service: RunningService;
  let bus: MessageBus;
  let observer: Subscription;
  let engines: LlamaEngine[];
  let router: RouterRuntime;
  const seen: RobustrlMessage[] = [];

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_wedge');
    service = await runService(
      {
        serviceName: 'e2e-wedge',
        bus: { adapter: 'kafka', brokers, clientId: 'e2e-wedge', topicPrefix },
        store: { kind: 'postgres', url: database.url },
        httpPort: 0,
      },
      [DetectorModule],
      { logLevels: ['error'] },
    );
    bus = service.app.get<MessageBus>(MESSAGE_BUS);
    observer = await bus.subscribe({ groupId: 'e2e-wedge-observer', topics: [Topics.verdicts], handler: async (d) => void seen.push(d.message) });
    engines = await startLlamaEngines(2, { idPrefix: 'wedge' });
  });

  afterAll(async () => {
    await router?.stop();
    for (const e of engines ?? []) {
      e.resume();
      e.kill();
    }
    await Promise.all((engines ?? []).map((e) => e.exited));
    await observer?.close();
    await service?.stop();
    await database?.drop();
  });

  it('SIGSTOP one engine under load: its machine is confirmed by rollout-requests, the other never', async () => {
    const now = () => new Date().toISOString();
    const machineOf = (e: LlamaEngine) => `m-${e.id}`;
    await bus.publish([
      createMessage(
        'JobStarted',
        { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 0, rolloutMachines: 2, detection: { rolloutStallWindowSeconds: 3 } },
        { jobId, source: 'e2e', occurredAt: now() },
      ),
      ...engines.map((e) =>
        createMessage(
          'MachineRegistered',
          { machineId: machineOf(e), role: 'rollout', zone: 'z', hardwareClass: 'cpu', gpus: 1, agentAddress: '127.0.0.1:1', dpRank: 0 },
          { jobId, source: 'e2e', occurredAt: now() },
        ),
      ),
    ]);
    // The machines' agents are alive throughout.
    const agents = setInterval(() => {
      void bus.publish(
        engines.map((e) =>
          createMessage(
            'GpuActivitySampled',
            { machineId: machineOf(e), sampledAt: now(), intervalSeconds: 1, tensorActive: 0.5, source: 'emulated' },
            { jobId, source: 'e2e', occurredAt: now() },
          ),
        ),
      );
    }, 1_000);
    router = new RouterRuntime(bus, {
      jobId,
      port: 0,
      host: '127.0.0.1',
      engines: engines.map((e) => ({ id: e.id, machineId: machineOf(e), baseUrl: e.url })),
      engineKind: 'llama.cpp',
      maxStaleness: 1,
      continuationPolicy: 'keep',
      requestManagerUrl: null,
      throughputSeconds: 5,
      evidenceSeconds: 1,
    });
    const url = await router.start();
    const stop = new AbortController();
    const loops = Array.from({ length: 6 }, async () => {
      while (!stop.signal.aborted) {
        await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ messages: [{ role: 'user', content: 'go on' }], stream: true, max_tokens: 48 }),
          signal: stop.signal,
        })
          .then((r) => r.text())
          .catch(() => undefined);
      }
    });
    try {
      await new Promise((r) => setTimeout(r, 2_000));
      const [hung, healthy] = engines;
      const hungAt = Date.now();
      hung.hang();
      const verdict = await eventually(
        'FaultConfirmed for the hung engine',
        () => seen.find((m): m is MessageOf<'FaultConfirmed'> => m.type === 'FaultConfirmed' && m.jobId === jobId && m.data.machineId === machineOf(hung)),
        60_000,
      );
      expect(verdict.data).toMatchObject({ rule: 'rollout-requests', handledAs: 'rollout', machineFaulty: false });
      expect(verdict.data.evidence.detail).toMatch(/no token from the engine for \d+ s with \d+ request\(s\) open/);
      // Found from the evidence within seconds of the 3 s stall window (the paper's rollout rule alone: 60 s, then a probe the agent answers).
      expect(Date.parse(verdict.occurredAt) - hungAt).toBeLessThan(15_000);
      expect(seen.filter((m) => m.type === 'FaultConfirmed' && m.jobId === jobId && m.data.machineId === machineOf(healthy))).toEqual([]);
    } finally {
      clearInterval(agents);
      stop.abort();
      await Promise.allSettled(loops);
    }
  });
});
