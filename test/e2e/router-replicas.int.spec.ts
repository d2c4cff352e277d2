import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { IDENTITY_HEADERS, trajectoryIdOf } from '@robustrl/rollout-manager';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { ChatMessage, FakeInferenceEngine, toolResultFor } from '@robustrl/testing/fake-inference-engine';
import { freePort } from '@robustrl/testing/free-port';
import { streamChat } from '@robustrl/testing/openai-client';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { TrajectoryStore } from '@robustrl/trajectory-store';
import { e2eServiceEnv, ServiceProcess } from './fixtures/service-process';

/**
 * The router's recording guarantee (docs/router.md "Recording") with the real things: two router replicas
 * (the rollout-manager's built main in replica mode, each its own process, following the engines the
 * rollout manager announces) serve one job behind a round-robin balancer —
 * the agent loops below, which send each request to the next replica and, like an agent whose request
 * failed, send it again to the other one — and record into the trajectory store on a real PostgreSQL.
 * The engines sample (every answer differs), so an answer given twice would show.
 *
 * Under load, a replica is killed with kill -9, and then the store's PostgreSQL server itself; the replica
 * comes back while the store is down and opens it when it is back. Afterwards
 * every trajectory holds exactly the turns its agent loop was answered with: none lost, none twice, none
 * the loop never saw. And all turns of a trajectory met one engine, whichever replica they entered by,
 * unless a replica logged an engine failure that moved it.
 */
const BROKERS = process.env.KAFKA_BROKERS!.split(',');
const POSTGRES = join(__dirname, '..', '..', 'deploy', 'local', 'postgres.sh');
const JOB = 'job-replicas';

jest.setTimeout(240_000);

/** One agent loop's view: per trajectory, the conversation it was answered with, and the engines that answered. */
interface Seen {
  messages: ChatMessage[];
  engines: Set<string>;
}

describe('router replicas: kill -9 of a replica and of the store under load loses no answered turn and stores none twice', () => {
  let localDir: string;
  let pgEnv: NodeJS.ProcessEnv;
  let databaseUrl: string;
  let engines: FakeInferenceEngine[];
  let manager: ServiceProcess;
  let replicas: ServiceProcess[];
  let urls: string[];
  const postgres = (command: 'start' | 'stop' | 'env') =>
    execFileSync('bash', [POSTGRES, command], { env: pgEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

  beforeAll(async () => {
    // The store's own PostgreSQL server: it is killed below, which the shared one other tests use must not be.
    localDir = mkdtempSync(join(tmpdir(), 'robustrl-replicas-'));
    pgEnv = { ...process.env, ROBUSTRL_LOCAL_DIR: localDir, PGPORT_LOCAL: String(await freePort()) };
    postgres('start');
    databaseUrl = /^DATABASE_URL=(.*)$/m.exec(postgres('env'))![1].trim();
    engines = await Promise.all([0, 1, 2, 3].map((i) => FakeInferenceEngine.start({ id: `e${i}`, tokensPerReply: 16, toolRounds: 2, sampling: 'random' })));
    // The services' own state (pool, inbox) on the shared server; the trajectories on the test's own.
    const own = await freshDatabaseUrl('robustrl_replicas');
    const topicPrefix = `replicas-${randomUUID()}.`;
    const service = {
      ...e2eServiceEnv(BROKERS, own.url, topicPrefix),
      ROBUSTRL_ORCHESTRATOR: 'none',
      ROBUSTRL_JOB_ID: JOB,
      ROBUSTRL_TRAJECTORY_DATABASE_URL: databaseUrl,
    };
    // The rollout manager: its pool holds the engines (listed here; registered by agents in a deployment) and announces them.
    manager = new ServiceProcess('rollout-manager', {
      ...service,
      ROBUSTRL_ROUTER_ENGINES: engines.map((e) => `${e.id}=${e.url}`).join(','),
      ROBUSTRL_ROUTER_PORT: String(await freePort()),
    });
    manager.start();
    // Two router replicas, no engine of their own: they route to what the rollout manager announces.
    const ports = [await freePort(), await freePort()];
    urls = ports.map((p) => `http://127.0.0.1:${p}`);
    replicas = ports.map(
      (port, i) =>
        new ServiceProcess('rollout-manager', {
          ...service,
          ROBUSTRL_ROUTER_REPLICA: 'on',
          ROBUSTRL_ROUTER_REPLICA_ID: `r${i}`,
          ROBUSTRL_ROUTER_PORT: String(port),
        }),
    );
    await Promise.all(replicas.map((r) => startReplica(r)));
  });

  afterAll(async () => {
    await Promise.all([...(replicas ?? []), manager].map((r) => r?.kill()));
    await Promise.all((engines ?? []).map((e) => e.close()));
    try {
      postgres('stop');
    } finally {
      rmSync(localDir, { recursive: true, force: true });
    }
  });

  it('holds through both kills', async () => {
    const seen = new Map<string, Seen>();
    let next = 0;
    let running = true;
    let answered = 0;
    let retried = 0;
    /** Send to the next replica; on any failure send the same request again, to the next one (a balancer's retry). */
    const ask = async (messages: ChatMessage[], headers: Record<string, string>) => {
      for (let attempt = 0; ; attempt++) {
        const url = urls[next++ % urls.length];
        try {
          const answer = await streamChat(
            url,
            { model: 'fake-model', messages, stream: true, tools: [{ type: 'function', function: { name: 'lookup' } }] },
            headers,
          );
          if (answer.done) return answer;
        } catch {
          // a killed replica, a store that is down (503): ask again
        }
        retried += 1;
        if (attempt > 600) throw new Error(`no answer after ${attempt} tries`);
        await sleep(50);
      }
    };
    const loop = async (worker: number) => {
      for (let n = 0; running; n++) {
        const promptId = `w${worker}-t${n}`;
        const headers = {
          [IDENTITY_HEADERS.job]: JOB,
          [IDENTITY_HEADERS.prompt]: promptId,
          [IDENTITY_HEADERS.sample]: '0',
          [IDENTITY_HEADERS.batch]: 'b0',
          [IDENTITY_HEADERS.step]: '0',
        };
        const mine: Seen = { messages: [{ role: 'user', content: `task ${promptId}` }], engines: new Set() };
        seen.set(trajectoryIdOf(JOB, promptId, 0), mine);
        for (;;) {
          const answer = await ask(mine.messages, headers);
          answered += 1;
          mine.engines.add(answer.engineId!);
          mine.messages.push(answer.message);
          const calls = answer.message.tool_calls ?? [];
          if (calls.length === 0) break;
          for (const call of calls) mine.messages.push({ role: 'tool', tool_call_id: call.id, content: toolResultFor(call) });
        }
      }
    };
    const loops = Array.from({ length: 12 }, (_, i) => loop(i));

    await eventually('answers flowing', () => (answered >= 60 ? true : undefined), 60_000);
    await replicas[0].kill('SIGKILL');
    const afterReplicaKill = answered;
    await eventually('answers flowing through the other replica', () => (answered >= afterReplicaKill + 60 ? true : undefined), 60_000);
    killPostgres(localDir);
    // The killed replica starts again while the store is down: it serves (503 to recorded requests) and
    // opens the store once it is back.
    await startReplica(replicas[0]);
    await eventually('the replica saying the store is not open yet', () =>
      replicas[0].lines.some((l) => /the trajectory store could not be opened yet/.test(l)) ? true : undefined,
    );
    await sleep(1_000);
    postgres('start');
    const afterStoreKill = answered;
    await eventually('answers flowing after the store came back', () => (answered >= afterStoreKill + 60 ? true : undefined), 90_000);
    running = false;
    await Promise.all(loops);

    const store = await EventStore.open({ kind: 'postgres', url: databaseUrl });
    try {
      const trajectories = new TrajectoryStore(store);
      const stored = await trajectories.prefixes([...seen.keys()]);
      const mismatches: string[] = [];
      let turns = 0;
      for (const [id, view] of seen) {
        const held = stored.get(id)?.turns ?? [];
        const got = held.map((t) => t.content);
        turns += got.length;
        if (!isDeepStrictEqual(got, view.messages.slice(1))) mismatches.push(`${id}: stored ${got.length} turns, answered ${view.messages.length - 1}`);
        // Stored as generated, by an engine, before the loop had it — not learnt later from the loop's next request.
        for (const t of held)
          if (t.kind !== 'tool-result' && (t.rolloutId === null || t.tokens === 0)) mismatches.push(`${id} turn ${t.turnIndex}: stored as the caller's input`);
      }
      expect(mismatches).toEqual([]);
      // The kills were felt: requests in flight failed and were asked again.
      expect(retried).toBeGreaterThan(0);
      expect(turns).toBeGreaterThan(180);
      // Affinity: every trajectory's turns met one engine, whichever replica they entered by — unless a
      // replica logged why it moved: a request of the trajectory failed on its engine, or one of its engines
      // left selection (on a loaded host an engine's answer or probe can miss its deadline).
      const logged = replicas.flatMap((r) => r.history);
      const unexplained = [...seen.entries()]
        .filter(([, v]) => v.engines.size > 1)
        .filter(
          ([id, v]) =>
            !logged.some(
              (l) => (l.includes('engine failed during a request') && l.includes(id)) || [...v.engines].some((e) => l.includes(`engine ${e} out of selection`)),
            ),
        )
        .map(([, v]) => v.messages[0].content);
      expect(unexplained).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

/** Start a replica and wait until it routes the engines the rollout manager announced. */
async function startReplica(replica: ServiceProcess): Promise<void> {
  replica.start();
  await eventually(
    'the replica following the announced engines',
    () => (replica.lines.some((l) => /following the rollout manager's engines: 4 announced/.test(l)) ? true : undefined),
    90_000,
  );
}

/** kill -9 of the PostgreSQL server: the postmaster and every backend, no shutdown, crash recovery at the next start. */
function killPostgres(localDir: string): void {
  const pid = Number(readFileSync(join(localDir, 'postgres', 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map(Number);
  for (const p of [pid, ...children]) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
