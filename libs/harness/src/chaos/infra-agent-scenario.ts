import { KafkaBus } from '@robustrl/bus';
import { createMessage, DataOf, RobustrlMessage } from '@robustrl/contracts';
import { Observer } from './infra-observer';
import { check, ScenarioResult } from './infra-scorecard';
import { waitFor } from './infra-wait';
import { freePort, ServiceProcess } from './private-infra';

/** What the agent scenario uses of the campaign's run (infra-chaos.ts). */
export interface AgentScenarioRun {
  bus: KafkaBus;
  observer: Observer;
  /** The services' environment (broker, store, topic prefix). */
  env: NodeJS.ProcessEnv;
  logDir: string;
  infraDir: string;
  /** The healthy job's id; the agent gets a job of its own beside it. */
  jobId: string;
}

/**
 * The scenario 'an agent started after old commands for its machine': commands for its machine that were
 * on the control topic before it started (a replay, an earlier incarnation's) are passed over, one for
 * its own incarnation is carried out.
 */
export async function agentAfterOldCommands(r: ScenarioResult, { bus, observer, env, logDir, infraDir, jobId }: AgentScenarioRun): Promise<void> {
  // Its own job, so the detector's view of this machine stays out of the healthy job's numbers.
  const agentJob = `${jobId}-agent`;
  const machineId = 'chaos-agent-0';
  const command = <T extends 'RestartTrainerGroup' | 'PromoteRolloutToTrainer'>(type: T, data: DataOf<T>, occurredAt = new Date()) =>
    createMessage(type, data, { jobId: agentJob, source: 'controller', occurredAt: occurredAt.toISOString() }) as RobustrlMessage;
  const promotion = (id: string, incarnation: string) =>
    command('PromoteRolloutToTrainer', { recoveryId: id, commandId: `${id}/1`, rolloutMachineId: machineId, replacesMachineId: 'trainer-9', incarnation });
  // On the control topic before the agent exists: a restart of its machine issued a minute ago naming no
  // incarnation (a replay), and a promotion for an earlier incarnation of the machine.
  await bus.publish([
    command(
      'RestartTrainerGroup',
      { recoveryId: 'old-restart', commandId: 'old-restart/1', machines: [machineId], step: 1, checkpointStep: null, keepBatch: true },
      new Date(Date.now() - 60_000),
    ),
    promotion('old-promotion', 'an-earlier-incarnation'),
  ]);
  const agent = new ServiceProcess(
    'agent',
    await freePort(),
    {
      ...env,
      ROBUSTRL_JOB_ID: agentJob,
      ROBUSTRL_MACHINE_ID: machineId,
      ROBUSTRL_ROLE: 'rollout',
      ROBUSTRL_AGENT_PORT: String(await freePort()),
      ROBUSTRL_WEIGHTS_PORT: '0',
      ROBUSTRL_WEIGHTS_SHM_DIR: infraDir,
      ROBUSTRL_GPU_SOURCE: 'emulated',
    },
    logDir,
  );
  agent.start();
  try {
    const registered = await waitFor('the agent registered', async () => observer.count(agentJob, 'MachineRegistered') > 0, 60_000).catch(() => false);
    const incarnation = observer.seen.find((m) => m.jobId === agentJob && m.type === 'MachineRegistered')?.data as { incarnation?: string } | undefined;
    check(
      r,
      'the agent registered with its incarnation',
      registered && typeof incarnation?.incarnation === 'string',
      incarnation?.incarnation ?? 'no registration',
    );
    // A command for this incarnation is carried out (answered), so the old ones were read and passed over.
    await bus.publish(promotion('current-promotion', incarnation?.incarnation ?? 'unknown'));
    const answered = (commandId: string) =>
      observer.seen.some(
        (m) => m.jobId === agentJob && (m.type === 'RecoveryCommandSucceeded' || m.type === 'RecoveryCommandFailed') && m.data.commandId === commandId,
      );
    const current = await waitFor('the current command answered', async () => answered('current-promotion/1'), 60_000).catch(() => false);
    check(r, 'a command for its incarnation is carried out', current, current ? 'answered' : 'never answered');
    const replayed = ['old-restart/1', 'old-promotion/1'].filter(answered);
    check(r, 'old commands for its machine ignored', replayed.length === 0, replayed.length === 0 ? 'neither acted on' : `acted on ${replayed.join(', ')}`);
  } finally {
    await agent.terminate();
  }
}
