import { join } from 'node:path';
import { LocalProcessSupervisor, MachineSpec } from '@robustrl/orchestrator';

const ROOT = join(__dirname, '..', '..', '..');
const FIXTURES = join(ROOT, 'test', 'e2e', 'fixtures');
export const AGENT_MAIN = join(ROOT, 'services', 'agent', 'dist', 'main.js');

/**
 * The machines of an end-to-end test: each one an agent process (services/agent) whose role process is a
 * Python stand-in for the framework (test/e2e/fixtures), started by the local process supervisor — the
 * orchestrator the controller uses to replace and restart machines. `env` adds a machine's own settings.
 */
export function agentMachines(opts: {
  brokers: string[];
  topicPrefix: string;
  databaseUrl: () => string;
  output: string[];
  env?: (m: MachineSpec & { jobId: string }) => Record<string, string>;
}): LocalProcessSupervisor {
  return new LocalProcessSupervisor({
    stopGraceMs: 2_000,
    output: (machineId, line) => opts.output.push(`[${machineId}] ${line}`),
    launch: (m) => ({
      command: process.execPath,
      args: [AGENT_MAIN],
      env: {
        KAFKA_BROKERS: opts.brokers.join(','),
        ROBUSTRL_TOPIC_PREFIX: opts.topicPrefix,
        DATABASE_URL: opts.databaseUrl(),
        ROBUSTRL_JOB_ID: m.jobId,
        ROBUSTRL_MACHINE_ID: m.machineId,
        ROBUSTRL_ROLE: m.role,
        ROBUSTRL_ZONE: m.zone,
        ROBUSTRL_HARDWARE_CLASS: m.hardwareClass,
        ROBUSTRL_GPUS: '1',
        ROBUSTRL_AGENT_PORT: '0',
        ROBUSTRL_TRAINER_COMMAND: `python3 ${join(FIXTURES, 'trainer.py')}`,
        ROBUSTRL_ROLLOUT_COMMAND: `python3 ${join(FIXTURES, 'rollout.py')}`,
        ROBUSTRL_GPU_SOURCE: 'emulated',
        ROBUSTRL_GPU_SAMPLE_SECONDS: '0.5',
        ROBUSTRL_STOP_GRACE_SECONDS: '1',
        // All machines share one host here: each weight server takes a free port.
        ROBUSTRL_WEIGHTS_PORT: '0',
        PYTHONUNBUFFERED: '1',
        ...opts.env?.(m),
      },
    }),
  });
}
