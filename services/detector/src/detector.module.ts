import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { CLOCK, DecidingConsumer, EVENT_STORE, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { DETECTOR_INPUT_TYPES, DetectorEvent, DetectorInput, DetectorState } from '@robustrl/detector-domain';
import { detectorFromEnv, evidenceSpanForVerdicts } from './detector-runtime';

/**
 * Detector: role- and phase-aware fault detection of trainer and rollout machines (paper §4).
 * The rules live in `rules/` and the decider in `detector.decider.ts`; this is the shell.
 */
export const DETECTOR_INPUTS = [Topics.membership, Topics.telemetry, Topics.heartbeat] as const;

@Module({})
export class DetectorModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly consumer: DecidingConsumer<DetectorState, DetectorEvent, DetectorInput>;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore, @Optional() @Inject(CLOCK) clock: (() => number) | null) {
    const { decider, tickIntervalMs, inputGaps, shard, shardLayoutChange } = detectorFromEnv(process.env);
    this.consumer = new DecidingConsumer(bus, store, {
      consumer: 'detector',
      topics: DETECTOR_INPUTS,
      inputTypes: DETECTOR_INPUT_TYPES,
      decider,
      tickIntervalMs,
      clock: clock ?? undefined,
      spanForTick: evidenceSpanForVerdicts,
      inputGaps,
      shard,
      shardLayoutChange,
    });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.consumer.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.consumer.stop();
  }
}
