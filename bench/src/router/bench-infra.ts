import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { Client } from 'pg';
import { BenchChild } from './bench-child';

const REPO_ROOT = resolve(__dirname, '..', '..', '..');

/** The fake engines every target routes to, started once for the whole run. */
export interface Engines {
  urls: string[];
  children: BenchChild[];
}

export async function startEngines(n: number): Promise<Engines> {
  const children = Array.from({ length: n }, (_, i) => new BenchChild(`fake-engine-${i}`, process.execPath, [resolve(__dirname, 'fake-engine.js')]));
  try {
    const ports = await Promise.all(children.map(async (c) => (JSON.parse(await c.waitForLine(/^\{"port":\d+\}$/, 15_000)) as { port: number }).port));
    return { urls: ports.map((p) => `http://127.0.0.1:${p}`), children };
  } catch (err) {
    await Promise.all(children.map((c) => c.stop()));
    throw err;
  }
}

/** A database of the run's own on the local server: its backends are the ones measured, and it is dropped after. */
export interface BenchDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export async function createBenchDatabase(baseUrl: string): Promise<BenchDatabase> {
  const name = `robustrl_routerbench_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: baseUrl });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(`cannot reach PostgreSQL at DATABASE_URL: ${(err as Error).message}. Start it with \`bash deploy/local/services.sh up\`.`);
  }
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end().catch(() => undefined);
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: async () => {
      const c = new Client({ connectionString: baseUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => c.end());
    },
  };
}

/**
 * How many trajectories the store holds of a batch (a level's run id): proof that a recording target
 * recorded, warm-up included. Null where there is no trajectory table (nothing ever recorded there).
 */
export async function recordedTrajectories(databaseUrl: string, batchId: string): Promise<number | null> {
  const c = new Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM robustrl_trajectories WHERE batch_id = $1', [batchId]);
    return rows[0].n;
  } catch {
    return null;
  } finally {
    await c.end();
  }
}

/** Delete the run's topics (its own prefix): a benchmark leaves the shared broker as it found it. */
export async function deleteTopics(brokers: string, prefix: string): Promise<void> {
  const admin = new Kafka({ brokers: brokers.split(','), clientId: 'bench-router', logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    if (topics.length > 0) await admin.deleteTopics({ topics, timeout: 10_000 });
  } finally {
    await admin.disconnect();
    // kafkajs resolves before its socket's shutdown completes: let it, so nothing is left open at exit.
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The gateways' venv python and the TCP_NODELAY shim (`deploy/local/router-baselines.sh status`), or why not. */
export function routerBaselines(): { python: string; shim: string } | { missing: string } {
  const script = resolve(REPO_ROOT, 'deploy', 'local', 'router-baselines.sh');
  try {
    const [python, shim] = execFileSync('bash', [script, 'status'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
      .trim()
      .split('\n');
    return { python, shim };
  } catch {
    return { missing: `the gateways are not installed: run bash ${script} ensure` };
  }
}
