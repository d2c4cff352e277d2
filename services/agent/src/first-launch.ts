import type { MessageBus } from '@robustrl/bus';
import { MessageOf, Topics } from '@robustrl/contracts';
import { TrainerGroup } from './trainer-group';
import { TrainerRoster } from './trainer-roster';

export interface FirstLaunchOf {
  jobId: string;
  machineId: string;
  worldSize: number;
  rendezvousPort: number;
  /** The agent's start (ms): names this incarnation's consumer group. */
  startedAt: number;
}

/**
 * Waits until `worldSize` trainers of the job registered and answers this machine's group (rank,
 * world size, rank 0's host), reading the membership topic from its beginning through a consumer
 * group of this incarnation's own. Null when `stop` says to give up (the agent closes, or a restart
 * command came first: the controller's group is the newer word). Says every 10 s what it waits for.
 */
export async function awaitFirstLaunchGroup(
  bus: MessageBus,
  of: FirstLaunchOf,
  stop: () => boolean,
  log: (line: string) => void,
): Promise<TrainerGroup | null> {
  const roster = new TrainerRoster(of.jobId);
  let changed: () => void = () => undefined;
  const subscription = await bus.subscribe({
    groupId: `robustrl-agent-${of.machineId}-roster-${of.startedAt}`,
    topics: [Topics.membership],
    types: ['MachineRegistered', 'MachineRoleChanged', 'MachineDeregistered', 'JobStarted'],
    fromBeginning: true,
    handler: async ({ message }) => {
      roster.apply(message as MessageOf<'MachineRegistered' | 'MachineRoleChanged' | 'MachineDeregistered' | 'JobStarted'>);
      changed();
    },
  });
  try {
    let lastSaid = 0;
    while (!stop()) {
      const group = roster.group(of.machineId, of.worldSize, of.rendezvousPort, of.startedAt);
      if (group) return group;
      if (Date.now() - lastSaid > 10_000) {
        lastSaid = Date.now();
        log(`trainer first launch waits for ${roster.waitingFor(of.machineId, of.worldSize, of.startedAt)}`);
      }
      await new Promise<void>((wake) => {
        const timer = setTimeout(wake, 1_000);
        changed = () => {
          clearTimeout(timer);
          wake();
        };
      });
    }
    return null;
  } finally {
    changed = () => undefined;
    await subscription.close();
  }
}
