import { Server } from 'node:http';
import { httpAuthFromEnv } from '@robustrl/service-kit';
import { rejectionOf } from '@robustrl/testing/rejection';
import { LocalProcessSupervisor } from '../local/local-process-supervisor';
import { MachineSpec, Orchestrator, OrchestratorError } from '../orchestrator';
import { HttpOrchestrator, serveOrchestrator } from './orchestrator-http';

const SLEEPER = { command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] };
const machine = (machineId: string, role: MachineSpec['role'] = 'rollout'): MachineSpec => ({ machineId, role, zone: 'zone-a', hardwareClass: 'cpu' });
const rejection = (p: Promise<unknown>) => rejectionOf(p, OrchestratorError);

/** The orchestrator port through HTTP: a machine host serving a real local process supervisor, the controller's adapter calling it. */
describe('HttpOrchestrator against a machine host (serveOrchestrator)', () => {
  let supervisor: LocalProcessSupervisor;
  let server: Server;
  let client: HttpOrchestrator;

  beforeEach(async () => {
    supervisor = new LocalProcessSupervisor({ launch: () => SLEEPER, output: () => undefined, stopGraceMs: 500 });
    const served = await serveOrchestrator(supervisor);
    server = served.server;
    client = new HttpOrchestrator(served.url);
  });
  afterEach(async () => {
    await new Promise((r) => server.close(r));
    await supervisor.close();
  });

  const statusOf = (id: string) => supervisor.machines().find((m) => m.machineId === id);

  it('carries every operation to the served orchestrator and its answers back', async () => {
    await supervisor.launchJob('job-1', [machine('t0', 'trainer'), machine('r0'), machine('r1')]);
    expect((await client.listMachines('job-1')).map((m) => m.machineId).sort()).toEqual(['r0', 'r1', 't0']);

    await client.isolateMachine({ operationId: 'op-1', jobId: 'job-1', machineId: 'r0', reason: 'rollout-fault' });
    expect(statusOf('r0')?.status).toBe('isolated');
    const replacement = await client.requestMachine({
      operationId: 'op-2',
      jobId: 'job-1',
      role: 'rollout',
      zone: 'zone-a',
      hardwareClass: 'cpu',
      replaces: 'r0',
    });
    expect(replacement).toMatchObject({ role: 'rollout', zone: 'zone-a', hardwareClass: 'cpu' });
    expect(statusOf(replacement.machineId)?.status).toBe('running');

    expect(await client.releaseMachine({ operationId: 'op-3', jobId: 'job-1', machineId: 'r1', reason: 'scale down' })).toBe('r1');
    expect(statusOf('r1')?.status).toBe('released');

    await client.restartMachines({ operationId: 'op-4', jobId: 'job-1', machineIds: ['t0'] });
    expect(statusOf('t0')?.restarts).toBe(1);
    await client.restartTask({ operationId: 'op-5', jobId: 'job-1' });
    expect(statusOf('t0')?.restarts).toBe(2);
    expect((await client.listMachines('job-1')).map((m) => m.machineId).sort()).toEqual([replacement.machineId, 't0'].sort());
  });

  it('a redelivered operation (a controller that crashed and asks again) is answered with the first result, nothing done twice', async () => {
    await supervisor.launchJob('job-2', [machine('a0')]);
    const request = { operationId: 'replace-a0', jobId: 'job-2', role: 'rollout' as const, zone: 'zone-a', hardwareClass: 'cpu', replaces: 'a0' };
    const first = await client.requestMachine(request);
    expect(await client.requestMachine(request)).toEqual(first);
    expect(supervisor.machines().filter((m) => m.jobId === 'job-2')).toHaveLength(2);
  });
});

describe('HttpOrchestrator errors', () => {
  /** An orchestrator whose every operation fails with `error`. */
  const failing = (error: unknown): Orchestrator => {
    const fail = () => Promise.reject(error);
    return {
      kind: 'local',
      listMachines: fail,
      isolateMachine: fail,
      requestMachine: fail,
      releaseMachine: fail,
      restartMachines: fail,
      restartTask: fail,
      close: async () => undefined,
    };
  };
  const withHost = async (orchestrator: Orchestrator, test: (client: HttpOrchestrator, url: string) => Promise<void>) => {
    const { server, url } = await serveOrchestrator(orchestrator);
    try {
      await test(new HttpOrchestrator(url), url);
    } finally {
      await new Promise((r) => server.close(r));
    }
  };
  const isolate = (client: HttpOrchestrator) => client.isolateMachine({ operationId: 'o', jobId: 'j', machineId: 'm', reason: 'r' });

  it("keeps the served orchestrator's line between try again and give up", async () => {
    await withHost(failing(new OrchestratorError('no capacity in zone-a', true)), async (client) => {
      const e = await rejection(isolate(client));
      expect(e.retriable).toBe(true);
      expect(e.message).toMatch(/\(503\): no capacity in zone-a/);
    });
    await withHost(failing(new OrchestratorError('role trainer has no owner to scale', false)), async (client) => {
      const e = await rejection(isolate(client));
      expect(e.retriable).toBe(false);
      expect(e.message).toMatch(/\(409\): role trainer has no owner to scale/);
    });
    // An unexpected failure of the host may pass: retriable.
    await withHost(failing(new Error('EMFILE')), async (client) => expect((await rejection(isolate(client))).retriable).toBe(true));
  });

  it('a request the host cannot parse is final (400); a host that is down is retriable', async () => {
    await withHost(failing(new Error('unused')), async (_client, url) => {
      const res = await fetch(`${url}/v1/jobs/j/machines/m/isolate`, { method: 'POST', body: '{"reason":"no operation id"}' });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ retriable: false, error: expect.stringMatching(/invalid request/) });
    });
    const { server, url } = await serveOrchestrator(failing(new Error('unused')));
    await new Promise((r) => server.close(r));
    const down = await rejection(isolate(new HttpOrchestrator(url)));
    expect(down.retriable).toBe(true);
    expect(down.message).toMatch(/did not answer POST \/v1\/jobs\/j\/machines\/m\/isolate/);
  });

  it('needs the machine host URL', () => {
    expect(() => HttpOrchestrator.fromEnv({})).toThrow(/ROBUSTRL_ORCHESTRATOR=http needs ROBUSTRL_ORCHESTRATOR_URL/);
    expect(() => HttpOrchestrator.fromEnv({ ROBUSTRL_ORCHESTRATOR_URL: 'host:8080' })).toThrow(/got 'host:8080'/);
    expect(HttpOrchestrator.fromEnv({ ROBUSTRL_ORCHESTRATOR_URL: 'http://machines:8080/' }).kind).toBe('http');
  });
});

/** Behind a token: these calls take machines out and restart the task. */
describe('the machine host behind a bearer token', () => {
  const TOKENS = ['machine-host-token-0001', 'machine-host-token-0002'];
  let supervisor: LocalProcessSupervisor;
  let server: Server;
  let url: string;

  beforeEach(async () => {
    supervisor = new LocalProcessSupervisor({ launch: () => SLEEPER, output: () => undefined, stopGraceMs: 500 });
    await supervisor.launchJob('job-t', [machine('t0', 'trainer'), machine('r0')]);
    // Served on every interface, as a site's launcher would: the tokens are required.
    ({ server, url } = await serveOrchestrator(supervisor, {
      host: '0.0.0.0',
      auth: httpAuthFromEnv({ ROBUSTRL_ORCHESTRATOR_TOKENS: TOKENS.join(',') }, '0.0.0.0', 'ROBUSTRL_ORCHESTRATOR'),
    }));
    url = url.replace('0.0.0.0', '127.0.0.1');
  });
  afterEach(async () => {
    await new Promise((r) => server.close(r));
    await supervisor.close();
  });

  it('refuses a call without a token or with a wrong one (401, final, nothing done); serves either token of a rotation', async () => {
    const raw = await fetch(`${url}/v1/jobs/job-t/restart`, { method: 'POST', body: '{"operationId":"no-token"}' });
    expect(raw.status).toBe(401);
    expect(raw.headers.get('www-authenticate')).toMatch(/^Bearer/);
    for (const client of [
      HttpOrchestrator.fromEnv({ ROBUSTRL_ORCHESTRATOR_URL: url }),
      HttpOrchestrator.fromEnv({ ROBUSTRL_ORCHESTRATOR_URL: url, ROBUSTRL_ORCHESTRATOR_TOKENS: 'not-the-host-token-000' }),
    ]) {
      const refused = await rejection(client.restartTask({ operationId: 'op-x', jobId: 'job-t' }));
      expect(refused.retriable).toBe(false);
      expect(refused.message).toMatch(/refused POST \/v1\/jobs\/job-t\/restart: .*ROBUSTRL_ORCHESTRATOR_TOKENS/);
    }
    expect(supervisor.machines().find((m) => m.machineId === 't0')?.restarts).toBe(0);
    for (const token of TOKENS) {
      const client = HttpOrchestrator.fromEnv({ ROBUSTRL_ORCHESTRATOR_URL: url, ROBUSTRL_ORCHESTRATOR_TOKENS: token });
      expect((await client.listMachines('job-t')).map((m) => m.machineId).sort()).toEqual(['r0', 't0']);
    }
  });

  it('will not serve on an address other machines reach without tokens', async () => {
    await expect(serveOrchestrator(supervisor, { host: '0.0.0.0' })).rejects.toThrow(/without a token: set ROBUSTRL_ORCHESTRATOR_TOKENS/);
  });
});
