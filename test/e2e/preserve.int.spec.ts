import { randomBytes } from 'node:crypto';
import { MessageBus, Subscription } from '@robustrl/bus';
import { MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { RequestManagerModule } from '@robustrl/request-manager';
import { EnginePool, HttpTrajectoryRecorder, OpenAiRouter, RolloutManagerModule, trajectoryIdOf } from '@robustrl/rollout-manager';
import { httpAuthFromEnv, MESSAGE_BUS, RunningService, runService } from '@robustrl/service-kit';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { eventually } from '@robustrl/testing/eventually';
import { ChatMessage, FakeInferenceEngine } from '@robustrl/testing/fake-inference-engine';
import { agentLoop, expectedConversation } from '@robustrl/testing/openai-client';

/**
 * Preserve end to end (paper §5.2.2): agent loops talk to the fault-tolerant router, which spreads
 * them over three inference engines and records every turn in the request manager's trajectory store
 * on the real PostgreSQL server; events go over the real Kafka broker. One engine dies mid-stream:
 * every trajectory completes, none loses or repeats a turn, and the reassignments are on the bus.
 * The request manager's API asks for a bearer token, as in a deployment: the router records with it.
 */
jest.setTimeout(120_000);

const TRAJECTORIES = 32;
const TOOL_ROUNDS = 2; // two tool calls, then an answer: 5 turns per trajectory
const TOKENS = 16;

describe('preserve: a rollout engine dies mid-stream, no trajectory loses a turn (real Kafka, PostgreSQL)', () => {
  const topicPrefix = `e2e-preserve-${randomBytes(4).toString('hex')}.`;
  const brokers = (process.env.KAFKA_BROKERS ?? '').split(',');
  let database: { url: string; drop(): Promise<void> };
  const jobId = 'job-preserve';
  const storeToken = `store-token-${randomBytes(8).toString('hex')}`;
  let service: RunningService;
  let bus: MessageBus;
  let observer: Subscription;
  let engines: FakeInferenceEngine[];
  let pool: EnginePool;
  let router: OpenAiRouter;
  let requestManagerUrl: string;
  const seen: RobustrlMessage[] = [];
  const all = <T extends MessageType>(type: T) => seen.filter((m): m is MessageOf<T> => m.type === type && m.jobId === jobId);

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_preserve');
    service = await runService(
      {
        serviceName: 'e2e-preserve',
        bus: { adapter: 'kafka', brokers, clientId: 'e2e-preserve', topicPrefix },
        store: { kind: 'postgres', url: database.url },
        httpPort: 0,
        httpAuth: httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS: storeToken }, '127.0.0.1'),
      },
      [RequestManagerModule, RolloutManagerModule],
      { logLevels: ['error'], jsonBodyLimit: '64mb' },
    );
    requestManagerUrl = (await service.app.getUrl()).replace('[::1]', '127.0.0.1');
    bus = service.app.get<MessageBus>(MESSAGE_BUS);
    observer = await bus.subscribe({ groupId: 'e2e-preserve-observer', topics: [Topics.trajectories], handler: async (d) => void seen.push(d.message) });

    engines = await Promise.all(
      ['e1', 'e2', 'e3'].map((id) => FakeInferenceEngine.start({ id, toolRounds: TOOL_ROUNDS, tokensPerReply: TOKENS, tokenIntervalMs: 5, weightVersion: 4 })),
    );
    pool = new EnginePool(
      engines.map((e) => ({ id: e.id, baseUrl: e.url, weightVersion: 4 })),
      { probeIntervalMs: 0, probeTimeoutMs: 300 },
    );
    router = new OpenAiRouter({
      pool,
      recorder: new HttpTrajectoryRecorder(requestManagerUrl, { token: storeToken }),
      bus,
      logger: { info: () => undefined, warn: () => undefined, error: (m, f) => process.stderr.write(`router: ${m} ${JSON.stringify(f)}\n`) },
    });
    await router.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await router?.close();
    for (const e of engines ?? []) e.kill();
    await pool?.stop();
    await observer?.close();
    await service?.stop();
    await database?.drop();
  });

  it(`${TRAJECTORIES} multi-turn trajectories with tool calls; kill one engine mid-stream → all complete, no turn lost or duplicated`, async () => {
    const authorized = { authorization: `Bearer ${storeToken}` };
    const prompt = (i: number): ChatMessage[] => [
      { role: 'system', content: 'solve the task; use the lookup tool' },
      { role: 'user', content: `task ${i % 8}` },
    ];
    const identity = (i: number) => ({
      'x-robustrl-job': jobId,
      'x-robustrl-prompt': `task-${i % 8}`,
      'x-robustrl-sample': String(Math.floor(i / 8)),
      'x-robustrl-batch': 'batch-9',
      'x-robustrl-step': '9',
    });
    // The first engine dies while its streams are half sent: once it has taken several requests, a
    // reply's time (16 tokens × 5 ms) after the last one began.
    const killer = (async () => {
      await eventually('e1 busy', () => (engines[0].requests.length >= 6 ? true : undefined), 60_000);
      await new Promise((r) => setTimeout(r, 25));
      engines[0].kill();
    })();
    const conversations = await Promise.all(
      Array.from({ length: TRAJECTORIES }, (_, i) => agentLoop(router.url, prompt(i), identity(i), { stream: i % 2 === 0 })),
    );

    await killer;
    expect(router.stats.failovers).toBeGreaterThan(0);
    expect(router.stats.recordingErrors).toBe(0);
    for (const [i, conversation] of conversations.entries()) {
      // The engines are deterministic: an undisturbed loop is the only right answer.
      expect(conversation).toEqual(await expectedConversation(prompt(i), TOOL_ROUNDS, TOKENS));
      const trajectoryId = trajectoryIdOf(jobId, `task-${i % 8}`, Math.floor(i / 8));
      // The rollout worker marks the trajectory done once its agent loop ends.
      const done = await fetch(`${requestManagerUrl}/v1/trajectories/${encodeURIComponent(trajectoryId)}/status`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...authorized },
        body: JSON.stringify({ status: 'completed' }),
      });
      expect(done.status).toBe(200);
      const stored = (await (await fetch(`${requestManagerUrl}/v1/trajectories/${encodeURIComponent(trajectoryId)}`, { headers: authorized })).json()) as {
        turns: Array<{ turnIndex: number; turnId: string; kind: string; content: ChatMessage; rolloutId: string | null }>;
      };
      expect(stored.turns.map((t) => t.turnIndex)).toEqual([0, 1, 2, 3, 4]);
      expect(stored.turns.map((t) => t.kind)).toEqual(['tool-call', 'tool-result', 'tool-call', 'tool-result', 'model-output']);
      expect(new Set(stored.turns.map((t) => t.turnId)).size).toBe(5);
      expect(stored.turns.map((t) => t.content.role)).toEqual(conversation.slice(2).map((m) => m.role));
    }

    // Nothing stored twice anywhere, and a restarted trainer gets the whole batch from the store.
    const batchUrl = `${requestManagerUrl}/v1/jobs/${jobId}/batches/batch-9/completed?currentWeightVersion=4&maxStaleness=0`;
    // Without the token the store tells nothing.
    expect((await fetch(batchUrl)).status).toBe(401);
    const batch = (await (await fetch(batchUrl, { headers: authorized })).json()) as {
      trajectories: Array<{ trajectoryId: string; turns: unknown[] }>;
    };
    expect(batch.trajectories).toHaveLength(TRAJECTORIES);
    expect(batch.trajectories.reduce((n, t) => n + t.turns.length, 0)).toBe(TRAJECTORIES * 5);

    // The failovers are on the bus: which trajectories moved from the dead engine, and where.
    await router.flushEvents();
    const reassigned = await eventually('reassignment events on Kafka', () =>
      all('TrajectoriesReassigned').length > 0 ? all('TrajectoriesReassigned') : undefined,
    );
    expect(reassigned.every((m) => m.data.fromRolloutId === 'e1')).toBe(true);
    expect(reassigned.flatMap((m) => m.data.assignments.map((a) => a.toRolloutId)).every((to) => to === 'e2' || to === 'e3')).toBe(true);
    await eventually('every turn announced once on Kafka', () => (all('TrajectoryTurnAppended').length === TRAJECTORIES * 5 ? true : undefined));
    expect(new Set(all('TrajectoryTurnAppended').map((m) => m.data.turnId)).size).toBe(TRAJECTORIES * 5);
  });
});
