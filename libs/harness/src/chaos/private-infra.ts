import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const REPO_ROOT = resolve(__dirname, '..', '..', '..', '..');
const KAFKA_SH = join(REPO_ROOT, 'deploy', 'local', 'kafka.sh');
const POSTGRES_SH = join(REPO_ROOT, 'deploy', 'local', 'postgres.sh');

/** A TCP port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/** `n` distinct free ports: the OS may hand out a port it just gave (and we closed) again. */
export async function freePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

/**
 * A real Kafka broker and PostgreSQL server of the run's own (the project's deploy/local scripts with
 * their own state folder and ports), so a fault-injection run can stop and start them without touching
 * the shared ones other tests use. The broker reuses the jars the shared one installed.
 */
export class PrivateInfra {
  readonly dir: string;
  private constructor(
    private readonly kafkaPort: number,
    private readonly kafkaControllerPort: number,
    private readonly pgPort: number,
    /** The address the broker listens on and advertises: a bridge's, when machines are network namespaces. */
    private readonly kafkaHost: string,
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'robustrl-chaos-'));
  }

  static async create(options: { kafkaHost?: string } = {}): Promise<PrivateInfra> {
    const [kafka, kafkaController, pg] = await freePorts(3);
    return new PrivateInfra(kafka, kafkaController, pg, options.kafkaHost ?? '127.0.0.1');
  }

  get brokers(): string[] {
    return [`${this.kafkaHost}:${this.kafkaPort}`];
  }

  get databaseUrl(): string {
    const out = this.script(POSTGRES_SH, 'env');
    const url = /^DATABASE_URL=(.*)$/m.exec(out)?.[1]?.trim();
    if (!url) throw new Error(`${POSTGRES_SH} env printed no DATABASE_URL`);
    return url;
  }

  startKafka = () => void this.script(KAFKA_SH, 'start');
  stopKafka = () => void this.script(KAFKA_SH, 'stop');
  startPostgres = () => void this.script(POSTGRES_SH, 'start');
  stopPostgres = () => void this.script(POSTGRES_SH, 'stop');

  /** Stop both servers, whatever state they are in; their data stays (a kept run is read afterwards). */
  stop(): void {
    for (const stop of [this.stopKafka, this.stopPostgres]) {
      try {
        stop();
      } catch {
        // already stopped
      }
    }
  }

  /** Stop both servers and remove their data. */
  destroy(): void {
    this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private script(path: string, command: string): string {
    const sharedState = process.env.ROBUSTRL_LOCAL_DIR ?? join(REPO_ROOT, '.local');
    const sharedJars = join(sharedState, 'kafka', 'libs');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ROBUSTRL_LOCAL_DIR: this.dir,
      KAFKA_HOST: this.kafkaHost,
      KAFKA_PORT: String(this.kafkaPort),
      KAFKA_CONTROLLER_PORT: String(this.kafkaControllerPort),
      PGPORT_LOCAL: String(this.pgPort),
      ...(existsSync(sharedJars) ? { KAFKA_LIBS_DIR: sharedJars } : {}),
    };
    return execFileSync('bash', [path, command], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  }
}

/** One service (`services/<name>/dist/main.js`) as its own process, its output in a log file. */
export class ServiceProcess {
  private child?: ChildProcess;
  /** When the current incarnation was spawned (ms since the epoch). */
  startedAt = 0;
  starts = 0;

  constructor(
    readonly name: string,
    readonly httpPort: number,
    private readonly env: NodeJS.ProcessEnv,
    private readonly logDir: string,
  ) {}

  start(): void {
    const main = join(REPO_ROOT, 'services', this.name, 'dist', 'main.js');
    if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build first`);
    const log = openSync(join(this.logDir, `${this.name}.log`), 'a');
    this.startedAt = Date.now();
    this.starts += 1;
    this.child = spawn(process.execPath, [main], {
      env: { ...process.env, ...this.env, ROBUSTRL_HTTP_PORT: String(this.httpPort) },
      stdio: ['ignore', log, log],
    });
    closeSync(log);
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** kill -9: no shutdown hook runs, the consumer group keeps the dead member until its session times out. */
  kill9(): Promise<void> {
    return this.stopWith('SIGKILL', 5_000);
  }

  /** SIGTERM: a graceful stop (consumers leave their groups, in-flight work commits). */
  terminate(): Promise<void> {
    return this.stopWith('SIGTERM', 30_000);
  }

  /** GET /readyz: its status code, or 0 when the process does not answer. */
  async readiness(): Promise<number> {
    return (await this.readinessAnswer()).status;
  }

  /** GET /readyz: its status and body (which says what is not ready), or 0 and why nothing answered. */
  readinessAnswer(): Promise<{ status: number; body: string }> {
    return new Promise((done) => {
      const req = get({ host: '127.0.0.1', port: this.httpPort, path: '/readyz', timeout: 5_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => done({ status: res.statusCode ?? 0, body }));
        res.on('error', (err) => done({ status: res.statusCode ?? 0, body: String(err) }));
      });
      req.on('timeout', () => req.destroy(new Error('no answer within 5 s')));
      req.on('error', (err) => done({ status: 0, body: err.message }));
    });
  }

  /** How the current incarnation ended (`exit code 1`, `signal SIGKILL`), or null while it runs. */
  get ended(): string | null {
    if (!this.child || this.running) return null;
    return this.child.signalCode ? `signal ${this.child.signalCode}` : `exit code ${this.child.exitCode}`;
  }

  /** The last `lines` lines of its log (every incarnation appends to one file). */
  logTail(lines = 20): string {
    try {
      return readFileSync(join(this.logDir, `${this.name}.log`), 'utf8')
        .trimEnd()
        .split('\n')
        .slice(-lines)
        .join('\n');
    } catch {
      return '(no log)';
    }
  }

  private async stopWith(signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    await exited;
    clearTimeout(timer);
  }
}
