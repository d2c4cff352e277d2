import { Delivery, DeliveryBatch } from '@robustrl/bus';
import { Draft, isSample, RobustrlMessage } from '@robustrl/contracts';
import { Stepped } from '@robustrl/domain-kit';
import { emptyWrite, Reloads } from './deciding-types';
import { DecisionSteps } from './decision-steps';
import { DecisionWriter } from './decision-writer';
import { InputGaps } from './input-gaps';
import { JobStates } from './job-states';
import { PoisonMessages } from './poison-messages';
import { StateLoader } from './state-loader';

/** What deciding on a batch works with: the consumer's parts, each by what of it is used. */
export interface BatchDeciderParts<State, Event extends RobustrlMessage, Input extends Event> {
  states: JobStates<State, Event>;
  loader: Pick<StateLoader<State, Event>, 'ensureLoaded' | 'decidedBefore'>;
  writer: Pick<DecisionWriter<Input>, 'appliedFacts' | 'commitInFlight'>;
  gaps: Pick<InputGaps, 'watched' | 'noteInput' | 'dueFor' | 'recordGapFor'>;
  steps: Pick<DecisionSteps<State, Event, Input>, 'onDelivery'>;
  poison: Pick<PoisonMessages, 'guard'>;
  reloads: Pick<Reloads, 'stale'>;
  /** Of these fact ids, those the inbox holds (applied before). */
  known: (eventIds: string[]) => Promise<Set<string>>;
  /** Run work in turn with the host's other serial work (ticks, snapshots, evictions). */
  inTurn: <T>(work: () => Promise<T>) => Promise<T>;
  isStopped: () => boolean;
  clock: () => number;
}

/**
 * A batch decided in one go (docs/contributors/delivery-guarantees.md, docs/contributors/snapshots.md): its jobs back in
 * memory, what of an input gap is due recorded, then each record through the decider — a fact applied
 * before is skipped, a record a previous incarnation decided (up to its checkpoint) only has its
 * sample folded again — and the batch's write (checkpoint, facts, outputs) handed to the writer.
 */
export class BatchDecider<State, Event extends RobustrlMessage = RobustrlMessage, Input extends Event = Event> {
  constructor(private readonly parts: BatchDeciderParts<State, Event, Input>) {}

  /** Decide on one batch (one partition's records) and hand its write over; records before the states' position are skipped. */
  async decide(batch: DeliveryBatch): Promise<void> {
    const { states, loader, writer, gaps } = this.parts;
    if (this.parts.reloads.stale || this.parts.isStopped()) return; // consumption starts over from the last snapshot after the reload
    const stream = `${batch.topic}/${batch.partition}`;
    const from = states.applied.get(stream) ?? -1n;
    // Offsets ascend within a batch: records are compared one by one only in a batch that straddles the
    // boundary (the first after a reload), not on every record (a BigInt parsed per record is measurable at 100k/s).
    const all = batch.deliveries;
    const fresh = all.length > 0 && BigInt(all[0].offset) >= from ? all : all.filter((d) => BigInt(d.offset) >= from);
    if (fresh.length === 0) return;
    // Read is read: the input's age counts from here, not from when its batch is decided.
    if (gaps.watched) for (const d of fresh) gaps.noteInput(d.message);
    // Async preparation first (evicted jobs back in memory, what of the gap is due); then the batch is decided in one go.
    const jobIds = [...new Set(fresh.map((d) => d.message.jobId))];
    for (const jobId of jobIds) {
      await loader.ensureLoaded(jobId);
      // Active from now: the idle sweep must not take it out of memory while this batch is being prepared.
      states.lastActive.set(jobId, this.parts.clock());
    }
    const facts = fresh.filter((d) => !isSample(d.message.type)).map((d) => d.message.eventId);
    const known = await this.parts.known(facts);
    if (gaps.watched) {
      // A job that speaks during a gap (new, or back from eviction) learns of it before its message;
      // the serial queue (ticks, snapshots) is waited for only when there is something to record.
      for (const jobId of jobIds) if (gaps.dueFor(jobId)) await this.parts.inTurn(() => gaps.recordGapFor(jobId));
    }
    if (this.parts.reloads.stale || this.parts.isStopped()) return;

    const decidedBefore = loader.decidedBefore.get(stream) ?? -1n;
    // Only the first batches after a restart hold records the previous incarnation decided.
    const replaysDecided = decidedBefore >= BigInt(fresh[0].offset);
    const now = this.parts.clock();
    const write = emptyWrite();
    for (const delivery of fresh) {
      const message = delivery.message;
      const sample = isSample(message.type);
      if (replaysDecided && BigInt(delivery.offset) <= decidedBefore) {
        // Decided by the previous incarnation: its facts and outputs came back from the inbox.
        if (sample) this.foldSample(message);
        continue;
      }
      if (!sample && (known.has(message.eventId) || writer.appliedFacts.has(message.eventId))) continue; // applied before
      const stepped = this.decideOn(delivery, now);
      if (stepped === null) continue; // dead-lettered: its decision kept throwing
      if (!sample) {
        write.applied.push(message);
        writer.appliedFacts.add(message.eventId);
      }
      write.applied.push(...stepped.events);
      write.outbox.push(...stepped.events);
      if (stepped.events.length > 0) (write.emitted.get(message.jobId) ?? write.emitted.set(message.jobId, []).get(message.jobId)!).push(...stepped.events);
      write.inputs.push({ input: message, emitted: stepped.events });
      states.lastActive.set(message.jobId, now);
      states.dirty.add(message.jobId);
    }
    states.applied.set(stream, BigInt(batch.nextOffset));
    const last = BigInt(batch.nextOffset) - 1n;
    // Only folded again (decided before the restart): nothing to write.
    if (last <= decidedBefore) return;
    // Every batch moves its stream's checkpoint (one row, however many records): what was decided is
    // known after a crash, and operators see each consumer's progress in the store.
    write.checkpoint = { stream, offset: last.toString() };
    // The next batch is decided while this one commits (decision-writer.ts `commitInFlight`).
    await writer.commitInFlight(write);
  }

  /** Fold a sample a previous incarnation already decided on (its outputs are in the state from the inbox). */
  private foldSample(message: RobustrlMessage): void {
    this.parts.states.fold(message);
    this.parts.states.dirty.add(message.jobId);
  }

  /**
   * One input through the decider (`step`); the state in memory moves on at once. A decider that
   * throws on a message leaves the job's state in doubt: reload, and after `POISON_ATTEMPTS` the
   * message is dead-lettered with the error instead of decided on (null; poison-messages.ts).
   */
  private decideOn(delivery: Delivery, now: number): Stepped<State, Draft, Event> | null {
    const input = delivery.message as Input;
    const before = this.parts.states.stateFor(input.jobId);
    return this.parts.poison.guard(delivery, () => {
      const stepped = this.parts.steps.onDelivery(delivery, before, now);
      this.parts.states.set(input.jobId, stepped.state);
      return stepped;
    });
  }
}
