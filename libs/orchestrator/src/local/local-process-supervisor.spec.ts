import { ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { transformFileSync } from '@swc/core';
import { MachineSpec, OrchestratorError } from '../orchestrator';
import { LocalLaunchCommand, LocalMachineLaunch, LocalProcessSupervisor, LocalProcessSupervisorOptions } from './local-process-supervisor';
import { rejectionOf } from '@robustrl/testing/rejection';

// Machines are real `node -e` processes; every script keeps running until signalled unless it says otherwise.
const SLEEPER = 'setInterval(() => {}, 1000)';
const ANNOUNCES_ITSELF = 'console.log(`pid ${process.pid} marker ${process.env.MARKER} id ${process.env.MACHINE_ID}`); setInterval(() => {}, 1000)';
const WITH_GRANDCHILD = [
  "const grandchild = require('child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });",
  'console.log(`grandchild ${grandchild.pid}`);',
  'setInterval(() => {}, 1000);',
].join('\n');
const DRAINS_ON_SIGTERM =
  "process.on('SIGTERM', () => { console.log('draining'); setTimeout(() => process.exit(0), 50); }); console.log('ready'); setInterval(() => {}, 1000)";
const IGNORES_SIGTERM = "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('ready'); setInterval(() => {}, 1000)";

const machine = (machineId: string, role: MachineSpec['role'] = 'trainer'): MachineSpec => ({ machineId, role, zone: 'zone-a', hardwareClass: 'cpu' });

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

async function eventually<T>(what: string, probe: () => T | undefined | null | false, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value != null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// A grandchild orphaned by its parent's death is a zombie (kill(pid, 0) still succeeds) until init
// reaps it, which in some containers takes a second or two.
const waitGone = (pid: number) => eventually(`process ${pid} to be gone`, () => !isAlive(pid), 15_000);

const rejection = (promise: Promise<unknown>) => rejectionOf(promise, OrchestratorError);

describe('LocalProcessSupervisor', () => {
  let supervisors: LocalProcessSupervisor[];
  let lines: Array<{ machineId: string; line: string }>;
  let launches: LocalMachineLaunch[];

  /** Each machine runs the script named by its id, else by its role, else SLEEPER; env MARKER counts launches. */
  function supervisor(scripts: Record<string, string> = {}, options: Partial<LocalProcessSupervisorOptions> = {}): LocalProcessSupervisor {
    const created = new LocalProcessSupervisor({
      launch: (m): LocalLaunchCommand => {
        launches.push(m);
        return {
          command: process.execPath,
          args: ['-e', scripts[m.machineId] ?? scripts[m.role] ?? SLEEPER],
          env: { MARKER: `launch-${launches.length}`, MACHINE_ID: m.machineId },
        };
      },
      output: (machineId, line) => lines.push({ machineId, line }),
      ...options,
    });
    supervisors.push(created);
    return created;
  }

  /** The rest of the nth line (0-based) of a machine that starts with prefix, once it has been printed. */
  const lineAfter = (machineId: string, prefix: string, nth = 0) =>
    eventually(
      `line ${nth} '${prefix}…' of ${machineId}`,
      () => lines.filter((l) => l.machineId === machineId && l.line.startsWith(prefix)).map((l) => l.line.slice(prefix.length))[nth],
    );

  beforeEach(() => {
    supervisors = [];
    lines = [];
    launches = [];
  });

  afterEach(async () => {
    await Promise.all(supervisors.map((s) => s.close()));
  });

  it('launches a job and lists its machines', async () => {
    const local = supervisor();

    await local.launchJob('job-1', [machine('trainer-0'), machine('rollout-0', 'rollout')]);

    expect(await local.listMachines('job-1')).toEqual([machine('trainer-0'), machine('rollout-0', 'rollout')]);
    expect(await local.listMachines('job-2')).toEqual([]);
    const snapshot = local.machines();
    expect(snapshot.map(({ machineId, status, restarts, jobId }) => ({ machineId, status, restarts, jobId }))).toEqual([
      { machineId: 'trainer-0', status: 'running', restarts: 0, jobId: 'job-1' },
      { machineId: 'rollout-0', status: 'running', restarts: 0, jobId: 'job-1' },
    ]);
    for (const { pid } of snapshot) expect(isAlive(pid!)).toBe(true);
    expect(launches).toEqual([
      { ...machine('trainer-0'), jobId: 'job-1' },
      { ...machine('rollout-0', 'rollout'), jobId: 'job-1' },
    ]);
    await expect(local.launchJob('job-2', [machine('trainer-0')])).rejects.toThrow('machine ids already in use: trainer-0');
  });

  it('killMachine kills the whole process group, grandchild included, and leaves the machine exited, not isolated', async () => {
    const local = supervisor({ trainer: WITH_GRANDCHILD });
    await local.launchJob('job-1', [machine('trainer-0')]);
    const leader = local.pidOf('trainer-0')!;
    const grandchild = Number(await lineAfter('trainer-0', 'grandchild '));
    expect(isAlive(grandchild)).toBe(true);

    local.killMachine('trainer-0');

    expect(await local.exits('trainer-0')).toEqual({ code: null, signal: 'SIGKILL' });
    await waitGone(grandchild);
    expect(isAlive(leader)).toBe(false);
    // Noticing is the control plane's job: the machine stays listed, and nothing relaunches it.
    expect(await local.listMachines('job-1')).toEqual([machine('trainer-0')]);
    expect(local.machines()[0]).toMatchObject({ status: 'exited', pid: leader, restarts: 0 });
  });

  it('restartMachines relaunches under the same id with the same environment and a new pid', async () => {
    const local = supervisor({ trainer: ANNOUNCES_ITSELF });
    await local.launchJob('job-1', [machine('trainer-0'), machine('trainer-1')]);
    const before = await lineAfter('trainer-0', 'pid ');
    const otherPid = local.pidOf('trainer-1');

    await local.restartMachines({ operationId: 'op-1', jobId: 'job-1', machineIds: ['trainer-0'] });

    const after = await lineAfter('trainer-0', 'pid ', 1);
    const [oldPid, ...oldRest] = before.split(' ');
    const [newPid, ...newRest] = after.split(' ');
    expect(newPid).not.toBe(oldPid);
    expect(Number(newPid)).toBe(local.pidOf('trainer-0'));
    // The launch command (and its env) is resolved once per machine: launch-1 is trainer-0's first launch.
    expect(newRest).toEqual(oldRest);
    expect(newRest.join(' ')).toBe('marker launch-1 id trainer-0');
    expect(launches).toHaveLength(2);
    expect(isAlive(Number(oldPid))).toBe(false);
    expect(local.pidOf('trainer-1')).toBe(otherPid);
    expect(local.machines().map((m) => [m.machineId, m.status, m.restarts])).toEqual([
      ['trainer-0', 'running', 1],
      ['trainer-1', 'running', 0],
    ]);
  });

  it('restartMachines refuses an unknown machine by name, before restarting any', async () => {
    const local = supervisor();
    await local.launchJob('job-1', [machine('trainer-0')]);
    await local.launchJob('job-2', [machine('trainer-9')]);
    const pid = local.pidOf('trainer-0');

    const error = await rejection(local.restartMachines({ operationId: 'op-1', jobId: 'job-1', machineIds: ['trainer-0', 'ghost', 'trainer-9'] }));

    expect(error.retriable).toBe(false);
    expect(error.message).toContain('unknown machine ghost in job job-1');
    expect(error.message).toContain('unknown machine trainer-9 in job job-1');
    expect(local.pidOf('trainer-0')).toBe(pid);
    expect(local.machines()[0].restarts).toBe(0);
  });

  it('stops with SIGTERM, and SIGKILLs a process that ignores it after the grace', async () => {
    const local = supervisor({ trainer: IGNORES_SIGTERM }, { stopGraceMs: 400 });
    await local.launchJob('job-1', [machine('stubborn', 'trainer'), machine('polite', 'rollout')]);
    await lineAfter('stubborn', 'ready');
    const started = Date.now();
    const stubbornExit = local.exits('stubborn');
    const politeExitAfterMs = local.exits('polite').then((exit) => ({ exit, ms: Date.now() - started }));

    await local.restartTask({ operationId: 'op-1', jobId: 'job-1' });

    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(await stubbornExit).toEqual({ code: null, signal: 'SIGKILL' });
    expect(lines).toContainEqual({ machineId: 'stubborn', line: 'ignoring SIGTERM' });
    const polite = await politeExitAfterMs;
    expect(polite.exit).toEqual({ code: null, signal: 'SIGTERM' });
    expect(polite.ms).toBeLessThan(400);
    expect(local.machines().map((m) => [m.machineId, m.status, m.restarts])).toEqual([
      ['stubborn', 'running', 1],
      ['polite', 'running', 1],
    ]);
  });

  it('isolates idempotently: the machine is killed, unlisted and never relaunched', async () => {
    const local = supervisor();
    await local.launchJob('job-1', [machine('trainer-0'), machine('rollout-0', 'rollout')]);
    await local.launchJob('job-2', [machine('rollout-9', 'rollout')]);
    const isolatedPid = local.pidOf('trainer-0')!;

    await local.isolateMachine({ operationId: 'op-1', jobId: 'job-1', machineId: 'trainer-0', reason: 'xid 79' });

    expect(isAlive(isolatedPid)).toBe(false);
    expect(await local.listMachines('job-1')).toEqual([machine('rollout-0', 'rollout')]);
    expect(local.machines()[0]).toMatchObject({ machineId: 'trainer-0', status: 'isolated', pid: isolatedPid });

    // Again under a new operation id, a vanished machine, and another job's machine: all succeed, none acts.
    await local.isolateMachine({ operationId: 'op-2', jobId: 'job-1', machineId: 'trainer-0', reason: 'again' });
    await local.isolateMachine({ operationId: 'op-3', jobId: 'job-1', machineId: 'ghost', reason: 'gone' });
    await local.isolateMachine({ operationId: 'op-4', jobId: 'job-1', machineId: 'rollout-9', reason: 'not ours' });
    expect(local.machines().find((m) => m.machineId === 'rollout-9')?.status).toBe('running');

    await local.restartTask({ operationId: 'op-5', jobId: 'job-1' });
    expect(local.machines().find((m) => m.machineId === 'trainer-0')).toMatchObject({ status: 'isolated', pid: isolatedPid, restarts: 0 });
    expect(local.machines().find((m) => m.machineId === 'rollout-0')).toMatchObject({ status: 'running', restarts: 1 });
    expect(local.machines().find((m) => m.machineId === 'rollout-9')).toMatchObject({ restarts: 0 });
    // The task restart restores the job's launch shape: a new trainer in the isolated one's place.
    expect(await local.listMachines('job-1')).toEqual([machine('rollout-0', 'rollout'), machine('trainer-1')]);
    expect(local.machines().find((m) => m.machineId === 'trainer-1')).toMatchObject({ status: 'running', restarts: 0 });
    const error = await rejection(local.restartMachines({ operationId: 'op-6', jobId: 'job-1', machineIds: ['trainer-0'] }));
    expect(error.retriable).toBe(false);
    expect(error.message).toContain('trainer-0 is isolated');
  });

  it('requestMachine starts a machine under a fresh id and resolves once it runs', async () => {
    const local = supervisor();
    await local.launchJob('job-1', [machine('trainer-0'), machine('trainer-1')]);
    await local.isolateMachine({ operationId: 'op-1', jobId: 'job-1', machineId: 'trainer-0', reason: 'xid 79' });

    const replacement = await local.requestMachine({
      operationId: 'op-2',
      jobId: 'job-1',
      role: 'trainer',
      zone: 'zone-b',
      hardwareClass: 'h100',
      replaces: 'trainer-0',
    });

    // trainer-0 and trainer-1 are taken (isolated machines keep their ids), so the sequence skips past them.
    expect(replacement).toEqual({ machineId: 'trainer-2', role: 'trainer', zone: 'zone-b', hardwareClass: 'h100' });
    expect(isAlive(local.pidOf('trainer-2')!)).toBe(true);
    expect(await local.listMachines('job-1')).toEqual([machine('trainer-1'), replacement]);
    expect(launches.at(-1)).toEqual({ ...replacement, jobId: 'job-1' });
  });

  it('requestMachine without replaces scales up: a new machine next to the running ones', async () => {
    const local = supervisor();
    await local.launchJob('job-1', [machine('rollout-0', 'rollout')]);
    const before = local.pidOf('rollout-0');

    const added = await local.requestMachine({ operationId: 'op-up', jobId: 'job-1', role: 'rollout', zone: 'zone-a', hardwareClass: 'cpu' });

    expect(added).toEqual(machine('rollout-1', 'rollout'));
    expect(isAlive(local.pidOf('rollout-1')!)).toBe(true);
    expect(local.pidOf('rollout-0')).toBe(before);
    expect(await local.listMachines('job-1')).toEqual([machine('rollout-0', 'rollout'), added]);
  });

  it('releaseMachine stops the machine gracefully; it leaves the list for good, and a repeat acts on nothing', async () => {
    const local = supervisor({ rollout: DRAINS_ON_SIGTERM }, { stopGraceMs: 5_000 });
    await local.launchJob('job-1', [machine('rollout-0', 'rollout'), machine('rollout-1', 'rollout')]);
    await local.launchJob('job-2', [machine('rollout-9', 'rollout')]);
    await lineAfter('rollout-0', 'ready');
    const releasedPid = local.pidOf('rollout-0')!;
    const exit = local.exits('rollout-0');

    const released = await local.releaseMachine({ operationId: 'op-1', jobId: 'job-1', machineId: 'rollout-0', reason: 'pool shrinks' });

    expect(released).toBe('rollout-0');
    // The SIGTERM handler ran and exited on its own, well before the grace would have ended in SIGKILL.
    expect(await exit).toEqual({ code: 0, signal: null });
    expect(lines).toContainEqual({ machineId: 'rollout-0', line: 'draining' });
    expect(isAlive(releasedPid)).toBe(false);
    expect(await local.listMachines('job-1')).toEqual([machine('rollout-1', 'rollout')]);
    expect(local.machines()[0]).toMatchObject({ machineId: 'rollout-0', status: 'released', pid: releasedPid });

    // The same operation again, the released machine under a new id, a vanished one, another job's: all succeed, none acts.
    await expect(local.releaseMachine({ operationId: 'op-1', jobId: 'job-1', machineId: 'rollout-0', reason: 'again' })).resolves.toBe('rollout-0');
    await expect(local.releaseMachine({ operationId: 'op-2', jobId: 'job-1', machineId: 'rollout-0', reason: 'again' })).resolves.toBe('rollout-0');
    await expect(local.releaseMachine({ operationId: 'op-3', jobId: 'job-1', machineId: 'ghost', reason: 'gone' })).resolves.toBe('ghost');
    await local.releaseMachine({ operationId: 'op-4', jobId: 'job-1', machineId: 'rollout-9', reason: 'not ours' });
    await local.isolateMachine({ operationId: 'op-5', jobId: 'job-1', machineId: 'rollout-0', reason: 'late' });
    expect(local.machines().find((m) => m.machineId === 'rollout-9')?.status).toBe('running');
    expect(local.machines()[0].status).toBe('released');

    // Never relaunched, and its id is not handed out again.
    await local.restartTask({ operationId: 'op-6', jobId: 'job-1' });
    expect(local.machines()[0]).toMatchObject({ status: 'released', pid: releasedPid, restarts: 0 });
    const error = await rejection(local.restartMachines({ operationId: 'op-7', jobId: 'job-1', machineIds: ['rollout-0'] }));
    expect(error.retriable).toBe(false);
    expect(error.message).toContain('rollout-0 is released');
    const added = await local.requestMachine({ operationId: 'op-8', jobId: 'job-1', role: 'rollout', zone: 'zone-a', hardwareClass: 'cpu' });
    expect(added.machineId).toBe('rollout-2');
  });

  it('releaseMachine SIGKILLs a machine that ignores SIGTERM after the grace', async () => {
    const local = supervisor({ rollout: IGNORES_SIGTERM }, { stopGraceMs: 300 });
    await local.launchJob('job-1', [machine('rollout-0', 'rollout')]);
    await lineAfter('rollout-0', 'ready');

    await local.releaseMachine({ operationId: 'op-1', jobId: 'job-1', machineId: 'rollout-0', reason: 'pool shrinks' });

    expect(await local.exits('rollout-0')).toEqual({ code: null, signal: 'SIGKILL' });
    expect(lines).toContainEqual({ machineId: 'rollout-0', line: 'ignoring SIGTERM' });
    expect(await local.listMachines('job-1')).toEqual([]);
  });

  it('requestMachine names machines with machineIdFor', async () => {
    const local = supervisor({}, { machineIdFor: (role, sequence) => `job-1-${role}-${sequence + 10}` });

    const spec = await local.requestMachine({ operationId: 'op-1', jobId: 'job-1', role: 'rollout', zone: 'zone-a', hardwareClass: 'cpu' });

    expect(spec.machineId).toBe('job-1-rollout-10');
  });

  it('requestMachine rejects as retriable when the process cannot be spawned, and keeps no machine', async () => {
    const local = new LocalProcessSupervisor({ launch: () => ({ command: '/nonexistent/robustrl-agent', args: [] }), output: () => {} });
    supervisors.push(local);

    const error = await rejection(local.requestMachine({ operationId: 'op-1', jobId: 'job-1', role: 'rollout', zone: 'zone-a', hardwareClass: 'cpu' }));

    expect(error.retriable).toBe(true);
    expect(error.message).toContain('/nonexistent/robustrl-agent');
    expect(error.message).toContain('ENOENT');
    expect(await local.listMachines('job-1')).toEqual([]);
    expect(local.machines()).toEqual([]);
  });

  it('acts once per operationId, also for concurrent duplicates', async () => {
    const local = supervisor();
    await local.launchJob('job-1', [machine('trainer-0')]);
    const request = { jobId: 'job-1', role: 'rollout' as const, zone: 'zone-a', hardwareClass: 'cpu' };

    const first = await local.requestMachine({ operationId: 'op-1', ...request });
    const again = await local.requestMachine({ operationId: 'op-1', ...request });
    const [concurrentA, concurrentB] = await Promise.all([
      local.requestMachine({ operationId: 'op-2', ...request }),
      local.requestMachine({ operationId: 'op-2', ...request }),
    ]);

    expect(again).toEqual(first);
    expect(concurrentB).toEqual(concurrentA);
    expect(concurrentA.machineId).not.toBe(first.machineId);
    expect(local.machines().map((m) => m.machineId)).toEqual(['trainer-0', first.machineId, concurrentA.machineId]);

    await local.restartMachines({ operationId: 'op-3', jobId: 'job-1', machineIds: ['trainer-0'] });
    const pidAfterRestart = local.pidOf('trainer-0');
    await local.restartMachines({ operationId: 'op-3', jobId: 'job-1', machineIds: ['trainer-0'] });
    expect(local.pidOf('trainer-0')).toBe(pidAfterRestart);
    expect(local.machines()[0].restarts).toBe(1);

    const misuse = await rejection(local.restartTask({ operationId: 'op-1', jobId: 'job-1' }));
    expect(misuse.retriable).toBe(false);
    expect(misuse.message).toContain('op-1 was already used for requestMachine');
  });

  it('forwards every stdout and stderr line of a machine to the output callback', async () => {
    const local = supervisor({
      trainer: "process.stdout.write('one\\ntwo\\n'); process.stderr.write('three\\n'); process.stdout.write('last, without newline')",
    });
    await local.launchJob('job-1', [machine('trainer-0')]);

    expect(await local.exits('trainer-0')).toEqual({ code: 0, signal: null });
    await lineAfter('trainer-0', 'last');

    const printed = lines.filter((l) => l.machineId === 'trainer-0').map((l) => l.line);
    expect(printed.filter((l) => l !== 'three')).toEqual(['one', 'two', 'last, without newline']);
    expect(printed).toContain('three');
    expect(local.machines()[0].status).toBe('exited');
  });

  it('close stops every machine and its descendants, and is idempotent', async () => {
    const local = supervisor({ trainer: WITH_GRANDCHILD, rollout: IGNORES_SIGTERM }, { stopGraceMs: 200 });
    await local.launchJob('job-1', [machine('trainer-0'), machine('trainer-1'), machine('rollout-0', 'rollout')]);
    await lineAfter('rollout-0', 'ready');
    const leaders = local.machines().map((m) => m.pid!);
    const grandchildren = [Number(await lineAfter('trainer-0', 'grandchild ')), Number(await lineAfter('trainer-1', 'grandchild '))];

    await Promise.all([local.close(), local.close()]);

    for (const pid of leaders) expect(isAlive(pid)).toBe(false);
    await Promise.all(grandchildren.map(waitGone));
    await local.close();
    expect(local.machines().map((m) => m.status)).toEqual(['exited', 'exited', 'exited']);
    expect((await rejection(local.listMachines('job-1'))).message).toContain('closed');
    await rejection(local.requestMachine({ operationId: 'op-1', jobId: 'job-1', role: 'trainer', zone: 'zone-a', hardwareClass: 'cpu' }));
  });

  describe('when the host process dies without close()', () => {
    // The host runs the compiled supervisor outside jest, whose sandboxed `process` never sees a real exit.
    let dir: string;
    let host: ChildProcess | undefined;

    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'local-supervisor-'));
      mkdirSync(join(dir, 'local'));
      const compile = (source: string, target: string) => {
        const options = { jsc: { parser: { syntax: 'typescript' as const }, target: 'es2022' as const }, module: { type: 'commonjs' as const } };
        writeFileSync(join(dir, target), transformFileSync(join(__dirname, source), options).code);
      };
      // OrchestratorError's base is the bus's (libs/bus/src/errors.ts, which imports nothing): the host's
      // `@robustrl/bus` is that one module.
      mkdirSync(join(dir, 'node_modules', '@robustrl', 'bus'), { recursive: true });
      compile('../../../bus/src/errors.ts', 'node_modules/@robustrl/bus/index.js');
      compile('../orchestrator.ts', 'orchestrator.js');
      compile('../operation-memo.ts', 'operation-memo.js');
      compile('local-process-supervisor.ts', 'local/local-process-supervisor.js');
      compile('local-machine.ts', 'local/local-machine.js');
      compile('process-groups.ts', 'local/process-groups.js');
      writeFileSync(
        join(dir, 'host.js'),
        `
        const { LocalProcessSupervisor } = require('./local/local-process-supervisor.js');
        const supervisor = new LocalProcessSupervisor({
          launch: () => ({ command: process.execPath, args: ['-e', ${JSON.stringify(WITH_GRANDCHILD)}] }),
          output: (machineId, line) => {
            console.log('leader ' + supervisor.pidOf(machineId) + ' ' + line);
            if (process.argv[2] === 'exit') process.exit(0);
          },
        });
        supervisor.launchJob('job-1', [{ machineId: 'trainer-0', role: 'trainer', zone: 'zone-a', hardwareClass: 'cpu' }]);
        `,
      );
    });

    afterEach(() => {
      host?.kill('SIGKILL');
      host = undefined;
    });

    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    /** Starts the host and returns the pids of its machine's leader and grandchild. */
    async function startHost(mode: 'exit' | 'wait'): Promise<{ leader: number; grandchild: number }> {
      host = spawn(process.execPath, [join(dir, 'host.js'), mode], { stdio: ['ignore', 'pipe', 'inherit'] });
      let stdout = '';
      host.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      const [, leader, grandchild] = await eventually('the pids from the host', () => stdout.match(/leader (\d+) grandchild (\d+)/));
      return { leader: Number(leader), grandchild: Number(grandchild) };
    }

    it('kills the machines on process.exit()', async () => {
      const { leader, grandchild } = await startHost('exit');

      await Promise.all([waitGone(leader), waitGone(grandchild)]);
    });

    it('kills the machines through the watchdog when the host is SIGKILLed', async () => {
      const { leader, grandchild } = await startHost('wait');
      expect(isAlive(leader)).toBe(true);

      host!.kill('SIGKILL');

      await Promise.all([waitGone(leader), waitGone(grandchild)]);
    });
  });
});
