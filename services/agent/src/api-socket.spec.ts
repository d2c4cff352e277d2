import { request } from 'node:http';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { eventually } from '@robustrl/testing/eventually';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentConfigFromEnv } from './agent-config';
import { listenOnSocket } from './api-socket';

const get = (socketPath: string, path: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ socketPath, path, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });

describe("the agent's API on a Unix socket (ROBUSTRL_AGENT_SOCKET)", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'robustrl-socket-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const app = (_req: unknown, res: { writeHead: (s: number) => { end: (b: string) => void } }) => res.writeHead(200).end('{"ok":true}');

  it('serves the application there, readable by the owner and group only, and removes the file when closed', async () => {
    const path = join(dir, 'agent.sock');
    const server = await listenOnSocket(app as never, path);
    expect(await get(path, '/v1/status')).toEqual({ status: 200, body: '{"ok":true}' });
    expect(statSync(path).mode & 0o777).toBe(0o660);
    await new Promise((r) => server.close(r));
    expect(existsSync(path)).toBe(false);
  });

  it('replaces the socket a crashed agent left, and refuses to replace anything else', async () => {
    const stale = join(dir, 'stale.sock');
    // A process killed while it listened leaves its socket file behind.
    const left = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(stale)})`], { stdio: 'ignore' });
    await eventually('the socket listening', () => (existsSync(stale) ? true : undefined));
    left.kill('SIGKILL');
    await new Promise((r) => left.once('exit', r));
    expect(statSync(stale).isSocket()).toBe(true);
    const server = await listenOnSocket(app as never, stale);
    expect((await get(stale, '/')).status).toBe(200);
    await new Promise((r) => server.close(r));

    const file = join(dir, 'not-a-socket');
    writeFileSync(file, 'keep me');
    await expect(listenOnSocket(app as never, file)).rejects.toThrow(/ROBUSTRL_AGENT_SOCKET: .*not-a-socket exists and is not a socket; not replacing it/);
    expect(existsSync(file)).toBe(true);
  });

  it('takes an absolute path only, naming the setting', () => {
    const base = { ROBUSTRL_JOB_ID: 'j', ROBUSTRL_MACHINE_ID: 'm', ROBUSTRL_ROLE: 'rollout' };
    expect(agentConfigFromEnv({ ...base, ROBUSTRL_AGENT_SOCKET: '/run/robustrl/agent.sock' }).apiSocket).toBe('/run/robustrl/agent.sock');
    expect(() => agentConfigFromEnv({ ...base, ROBUSTRL_AGENT_SOCKET: 'agent.sock' })).toThrow(/ROBUSTRL_AGENT_SOCKET: the socket's absolute path/);
  });
});
