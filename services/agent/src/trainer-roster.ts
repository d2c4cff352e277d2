import { MessageOf, restartsTask } from '@robustrl/contracts';
import { TrainerGroup } from './trainer-group';

/**
 * The group a trainer's *first* launch forms with, folded from the job's membership events: its
 * current trainer machines (registered or lent as trainers, not deregistered) in rank order — by
 * data-parallel rank where the machines have one, then by machine id. Pure; first-launch.ts feeds it
 * the membership topic from its beginning and the agent launches once `group` answers.
 *
 * This is what lets every launch, first or restart, take its rank, world size and rendezvous from the
 * agent (a restart's come with the controller's RestartTrainerGroup, trainer-group.ts): a DaemonSet
 * configures every agent alike, and no launcher has to inject RANK or MASTER_ADDR per machine.
 * Rank 0's reachable host (MachineRegistered.hostAddress) is the rendezvous.
 */
type MembershipFact = MessageOf<'MachineRegistered' | 'MachineRoleChanged' | 'MachineDeregistered' | 'JobStarted'>;

interface Member {
  machineId: string;
  role: string;
  dpRank: number | null;
  hostAddress: string | null;
  gone: boolean;
  /** When it registered (ms). */
  registeredAt: number;
}

export class TrainerRoster {
  private readonly members = new Map<string, Member>();
  /**
   * When the task last restarted (a resumed JobStarted, announced before its machines restart): every
   * agent registers again after it, so membership from before it is of the previous incarnation — a
   * standby promoted then, a trainer isolated then — and is forgotten (ms; a topic's partitions may
   * deliver an old registration after the restart, so it is compared by time, not by order).
   */
  private since = -Infinity;
  /** The trainer epoch of the task's first group: a restarted task's (its JobStarted), else 0 (docs/contributors/recovery.md "Fencing"). */
  private epoch = 0;

  constructor(private readonly jobId: string) {}

  apply(m: MembershipFact): void {
    if (m.jobId !== this.jobId) return;
    const at = Date.parse(m.occurredAt);
    if (m.type === 'JobStarted') {
      if (!restartsTask(m.data) || at <= this.since) return;
      this.since = at;
      this.epoch = m.data.trainerEpoch ?? this.epoch;
      for (const [id, member] of this.members) if (member.registeredAt < at) this.members.delete(id);
      return;
    }
    if (at < this.since) return;
    const d = m.data;
    switch (m.type) {
      case 'MachineRegistered': {
        const data = d as MessageOf<'MachineRegistered'>['data'];
        this.members.set(data.machineId, {
          machineId: data.machineId,
          role: data.role,
          dpRank: data.dpRank,
          hostAddress: data.hostAddress ?? null,
          gone: false,
          registeredAt: at,
        });
        return;
      }
      case 'MachineRoleChanged': {
        const member = this.members.get(d.machineId);
        if (member) member.role = (d as MessageOf<'MachineRoleChanged'>['data']).to;
        return;
      }
      case 'MachineDeregistered': {
        const member = this.members.get(d.machineId);
        if (member) member.gone = true;
        return;
      }
    }
  }

  /** The job's current trainers in rank order. */
  trainers(): string[] {
    return [...this.members.values()]
      .filter((m) => !m.gone && m.role === 'trainer')
      .sort((a, b) => (a.dpRank ?? Number.MAX_SAFE_INTEGER) - (b.dpRank ?? Number.MAX_SAFE_INTEGER) || a.machineId.localeCompare(b.machineId))
      .map((m) => m.machineId);
  }

  /**
   * `machineId`'s group of `worldSize` trainers, or null while fewer have registered, this machine is
   * not among the first `worldSize`, rank 0 registered no reachable host, or the machine's own
   * registration since `registeredSince` (its agent's start) has not been read yet.
   */
  group(machineId: string, worldSize: number, rendezvousPort: number, registeredSince = -Infinity): TrainerGroup | null {
    // Until its own registration of this incarnation is read, the roster is history being caught up
    // on (a task restart's previous membership): the group it shows may be one that no longer exists.
    if ((this.members.get(machineId)?.registeredAt ?? -Infinity) < registeredSince) return null;
    const ranked = this.trainers().slice(0, worldSize);
    const rank = ranked.indexOf(machineId);
    if (ranked.length < worldSize || rank < 0) return null;
    const master = this.members.get(ranked[0])?.hostAddress ?? null;
    if (master === null) return null;
    return {
      rank,
      worldSize,
      members: ranked.map((id, i) => ({ machineId: id, rank: i, agentAddress: null })),
      masterAddr: master,
      masterPort: rendezvousPort,
      trainerEpoch: this.epoch,
    };
  }

  /** What the first launch still waits for, for the agent's progress line. */
  waitingFor(machineId: string, worldSize: number, registeredSince = -Infinity): string {
    if ((this.members.get(machineId)?.registeredAt ?? -Infinity) < registeredSince) return 'its own registration to be read back from the membership topic';
    const trainers = this.trainers();
    if (trainers.length < worldSize)
      return `${worldSize - trainers.length} more trainer machine(s) to register (have ${trainers.length ? trainers.join(', ') : 'none'})`;
    const ranked = trainers.slice(0, worldSize);
    if (!ranked.includes(machineId)) return `a place in the group: the first ${worldSize} trainers are ${ranked.join(', ')}`;
    return `rank 0 (${ranked[0]}) to register its host address (ROBUSTRL_ADVERTISE_HOST)`;
  }
}
