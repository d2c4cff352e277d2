import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { descendantsOf, signalAll } from '@robustrl/agent';
import type { DegradedHost, FaultHost, Injection } from './fault-host';
import { machinesWithRoleProcess, runningMachines, servingEngines } from './fault-host';
import type { ScheduledFault } from './fault-schedule';
import { pickOf } from './fault-schedule';

/**
 * Faults where nothing dies (DESIGN §Detection): a dependency or a machine that is slow, wrong or stuck
 * while it still answers its health checks — PostgreSQL at seconds a write, an agent whose clock is
 * minutes off, an engine stopped in the middle of a weight load.
 */
export const DEGRADED_FAULTS = ['slow-postgres', 'clock-skew', 'stop-engine-during-load'] as const;
export type DegradedFault = (typeof DEGRADED_FAULTS)[number];

export type { DegradedHost } from './fault-host';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The compiled preload that lets the clock-skew fault step an agent's clock (skewed-clock.ts): beside
 * this file when the campaign runs from the build, in the build when it runs from source (a spec).
 * Null when there is no build: agents then run on the host's clock and clock-skew finds no target.
 */
export function skewedClockPreload(): string | null {
  for (const candidate of [join(__dirname, 'skewed-clock.js'), resolve(__dirname, '..', '..', 'dist', 'chaos', 'skewed-clock.js')])
    if (existsSync(candidate)) return candidate;
  return null;
}

/** How long a stopped engine is left stopped at most: the agent's load deadline is what should end it first. */
const STOPPED_AT_MOST_MS = 180_000;

export function degradedFault(host: FaultHost & DegradedHost, fault: ScheduledFault): Promise<Injection> {
  switch (fault.kind as DegradedFault) {
    case 'slow-postgres':
      return slowPostgres(host, fault);
    case 'clock-skew':
      return clockSkew(host, fault);
    case 'stop-engine-during-load':
      return stopEngineDuringLoad(host, fault);
  }
}

/**
 * PostgreSQL slowed, not stopped: every chunk between the services and the server held 0.3–1 s each
 * way (a write of a few round trips takes seconds) for 5× the drawn down time.
 */
async function slowPostgres(host: FaultHost & DegradedHost, fault: ScheduledFault): Promise<Injection> {
  const proxy = host.postgresProxy;
  if (!proxy) return { target: 'none', note: 'the services reach PostgreSQL directly (no relay to slow)' };
  const latencyMs = Math.round(300 + fault.pick * 700);
  const forMs = fault.downSeconds * 5_000;
  proxy.slow(latencyMs);
  await sleep(forMs);
  proxy.slow(0);
  return { target: 'postgres', note: `${latencyMs} ms each way for ${Math.round(forMs / 1000)} s` };
}

/**
 * A machine's clock stepped 2–5 minutes ahead or behind (a broken NTP), and stepped back after 10×
 * the drawn down time: its agent stamps what it reports with the wrong time meanwhile.
 */
async function clockSkew(host: FaultHost & DegradedHost, fault: ScheduledFault): Promise<Injection> {
  if (!host.clocksSkewable) return { target: 'none', note: 'agents run without the clock preload (no build of libs/harness/src/chaos/skewed-clock.ts)' };
  const candidates = [...runningMachines(host, 'trainer'), ...runningMachines(host, 'rollout')];
  const target = pickOf(candidates, fault.pick);
  if (!target) return { target: 'none', note: 'no running machine' };
  const minutes = 2 + Math.round(fault.pick * 30) / 10;
  // Ahead or behind, drawn with the rest of the fault (the pick's hundredths).
  const ahead = Math.floor(fault.pick * 100) % 2 === 0;
  const skewMs = Math.round((ahead ? 1 : -1) * minutes * 60_000);
  const file = host.clockFile(target);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, String(skewMs));
  const forMs = fault.downSeconds * 10_000;
  await sleep(forMs);
  writeFileSync(file, '0');
  return { target, note: `clock ${skewMs > 0 ? 'ahead' : 'behind'} by ${minutes} min for ${Math.round(forMs / 1000)} s` };
}

/**
 * SIGSTOP of a rollout's engine the moment its agent begins loading a version into it: the engine is
 * alive, its port still accepts connections, and the load never finishes. The agent's load deadline
 * must call it a fault and restart it; the engine is let go (SIGCONT) once its agent replaced the
 * process, or after STOPPED_AT_MOST_MS.
 */
async function stopEngineDuringLoad(host: FaultHost & DegradedHost, fault: ScheduledFault): Promise<Injection> {
  const serving = servingEngines(host);
  const wanted = pickOf(serving.length ? serving : machinesWithRoleProcess(host, 'rollout'), fault.pick);
  if (!wanted) return { target: 'none', note: 'no rollout with a running engine' };
  const stopped = await new Promise<number[] | null>((done) => {
    const timer = setTimeout(() => finish(null), 300_000);
    const unwatch = host.watch((machineId, line) => {
      if (machineId !== wanted || !/engine loads version \d+/.test(line)) return;
      const agent = host.supervisor.pidOf(machineId);
      const engine = agent === undefined ? [] : descendantsOf(agent);
      signalAll(engine, 'SIGSTOP');
      finish(engine);
    });
    const finish = (value: number[] | null) => {
      clearTimeout(timer);
      unwatch();
      done(value);
    };
  });
  if (!stopped) return { target: 'none', note: `no load began on ${wanted} within 300 s: nothing stopped` };
  const since = Date.now();
  // A load of a few tens of milliseconds can finish before the signal lands: then the engine was stopped
  // just after its load, outside any, which the note says (its agent finds it by its next look).
  let finished = false;
  const unwatch = host.watch((machineId, line) => {
    if (machineId === wanted && Date.now() - since < 2_000 && /engine loaded version \d+/.test(line)) finished = true;
  });
  const replaced = await host
    .until(
      'the stopped engine replaced',
      () => stopped.every((pid) => !descendantsOf(host.supervisor.pidOf(wanted) ?? -1).includes(pid)),
      STOPPED_AT_MOST_MS,
      250,
    )
    .then(() => true)
    .catch(() => false);
  unwatch();
  signalAll(stopped, 'SIGCONT');
  const held = Math.round((Date.now() - since) / 1000);
  const when = finished ? 'stopped just after a load (it finished before the signal landed)' : 'stopped as it began a load';
  return {
    target: wanted,
    note: replaced ? `${when}; its agent replaced it after ${held} s` : `${when}; still there after ${held} s (let go)`,
  };
}
