import { InProcessBus } from '@robustrl/bus';
import { createMessage } from '@robustrl/contracts';
import { messagesOf } from '@robustrl/testing/bus-messages';
import { eventually } from '@robustrl/testing/eventually';
import { agentConfigFromEnv } from '../agent-config';
import { AgentRuntime } from '../agent-runtime';
import { stopMarginMs, TerminationNotice } from './termination-notice';

describe('SIGTERM as a notice: the rule', () => {
  const notice = (o: { graceMs: number; running: () => boolean; expected?: string | null }) => {
    const reports: Array<{ detail: string; departsInMs: number }> = [];
    const lines: string[] = [];
    const n = new TerminationNotice({
      graceMs: o.graceMs,
      rolesRunning: o.running,
      expected: () => o.expected ?? null,
      report: async (detail, departsInMs) => void reports.push({ detail, departsInMs }),
      log: (line) => lines.push(line),
      pollMs: 5,
    });
    return { n, reports, lines };
  };

  it('keeps a tenth of the grace, at most 10 s, for the agent to stop', () => {
    expect(stopMarginMs(30_000)).toBe(3_000);
    expect(stopMarginMs(600_000)).toBe(10_000);
  });

  it('reports the departure with the whole grace, then waits until the roles stop', async () => {
    let running = true;
    const { n, reports } = notice({ graceMs: 60_000, running: () => running });
    let stopped = false;
    const done = n.terminate().then(() => (stopped = true));
    await eventually('reported', () => reports[0]);
    expect(reports).toEqual([{ detail: 'SIGTERM: this machine is being evicted or drained (60 s until SIGKILL)', departsInMs: 60_000 }]);
    await new Promise((r) => setTimeout(r, 50));
    expect(stopped).toBe(false);
    running = false;
    await done;
    // A second SIGTERM reports nothing more.
    await n.terminate();
    expect(reports).toHaveLength(1);
  });

  it('stops before the SIGKILL when the roles are still running', async () => {
    const { n, lines } = notice({ graceMs: 300, running: () => true });
    const started = Date.now();
    await n.terminate();
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(300 - stopMarginMs(300) - 10);
    expect(waited).toBeLessThan(300);
    expect(lines.at(-1)).toBe('SIGTERM: the grace is nearly over; stopping the roles');
  });

  type Case = { graceMs: number; running: () => boolean; expected?: string };
  it.each<[string, Case]>([
    ['no grace period is known', { graceMs: 0, running: () => true }],
    ['no role runs (the job finished here)', { graceMs: 30_000, running: () => false }],
    ['the control plane ordered the stop', { graceMs: 30_000, running: () => true, expected: 'the control plane replaced this machine (c-1)' }],
  ])('is no notice when %s: the agent stops at once', async (_, o) => {
    const { n, reports } = notice(o);
    await n.terminate();
    expect(reports).toEqual([]);
  });
});

describe('SIGTERM as a notice: an agent with a role running', () => {
  let bus: InProcessBus;
  let runtime: AgentRuntime;

  const start = async (graceSeconds: string) => {
    bus = new InProcessBus();
    runtime = new AgentRuntime(
      bus,
      agentConfigFromEnv({
        ROBUSTRL_JOB_ID: 'job-1',
        ROBUSTRL_MACHINE_ID: 'm-1',
        ROBUSTRL_ROLE: 'rollout',
        ROBUSTRL_ROLE_COMMAND: 'exec sleep 60',
        ROBUSTRL_GPU_SOURCE: 'emulated',
        ROBUSTRL_GPU_SAMPLE_SECONDS: '3600',
        ROBUSTRL_WEIGHTS_PORT: '0',
        ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
        ROBUSTRL_AGENT_TERMINATION_GRACE_SECONDS: graceSeconds,
        ROBUSTRL_STOP_GRACE_SECONDS: '1',
      }),
    );
    await runtime.start('http://127.0.0.1:1');
  };

  afterEach(async () => {
    await runtime.stop();
    await bus.close();
  });

  const signals = () => messagesOf(bus, 'AgentFaultSignalled');

  it('reports node-draining with the grace as the time left, and holds the stop while the role runs', async () => {
    await start('2');
    const started = Date.now();
    await runtime.terminate();
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000 - stopMarginMs(2_000) - 50);
    expect(signals().map((s) => s.data)).toEqual([expect.objectContaining({ machineId: 'm-1', role: 'rollout', signal: 'node-draining', departsInMs: 2_000 })]);
  });

  it('after the control plane ordered this machine replaced, a SIGTERM is that order: no notice', async () => {
    await start('30');
    const order = createMessage(
      'ReplaceMachine',
      { recoveryId: 'm-1/v1/recovery', commandId: 'm-1/v1/recovery/1', machineId: 'm-1', role: 'rollout', zone: 'az-1', hardwareClass: 'h100x8' },
      { jobId: 'job-1', source: 'controller', occurredAt: new Date().toISOString() },
    );
    await bus.publish(order);
    // The in-process bus delivers at once; a moment for the handler.
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    await runtime.terminate();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(signals()).toEqual([]);
  });
});
