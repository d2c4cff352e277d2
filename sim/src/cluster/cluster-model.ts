import type { Scenario } from '../scenario';

/** One machine as its agent, the pipeline, the orchestrator and the fault injector all see it. */
export interface Machine {
  id: string;
  role: 'trainer' | 'rollout';
  /** The hardware is up (a silent machine fault sets it false). */
  alive: boolean;
  /** The role process: ready = working; anything else = not serving. */
  process: 'starting' | 'initializing' | 'ready' | 'dead';
  /** Incarnation of the role process: actions scheduled by an older one are ignored. */
  epoch: number;
  slots: number;
  running: Set<Sample>;
  /** Weight versions held whole, and buckets of versions being pulled. */
  held: Set<number>;
  /** Bumped whenever `held` changes: what the pipeline derived from it (its newest usable weights) is stale. */
  heldChanges: number;
  buckets: Map<number, Set<number>>;
  completedInWindow: number;
  phase: string;
  registered: boolean;
}

export interface Sample {
  id: string;
  step: number;
  attempt: number;
  promptId: string;
  sampleIndex: number;
  turns: number;
  turnSeconds: number;
  toolSeconds: number[];
  turnsDone: number;
  owner: Machine | null;
  /** Bumped when the sample moves or is dropped: its scheduled turn ends become stale. */
  epoch: number;
  awaitingTool: boolean;
  done: boolean;
}

export interface Batch {
  step: number;
  attempt: number;
  samples: Sample[];
  done: number;
  released: boolean;
}

export function batchId(b: Batch): string {
  return `b${b.step}.${b.attempt}`;
}

/** Sizes derived from the scenario that more than one actor needs. */
export interface JobShape {
  /** Samples per step's batch. */
  batchSize: number;
  /** Concurrent samples per rollout machine (replacements get the same). */
  rolloutSlots: number;
  bucketBytes: number;
  /** One bucket over the weight link. */
  pullSeconds: number;
}

export function jobShape(s: Scenario): JobShape {
  const batchSize = s.batch.prompts * s.batch.responsesPerPrompt;
  const totalBytes = Math.round(s.model.parametersBillions * 1e9 * 2);
  const bucketBytes = Math.ceil(totalBytes / s.training.weightBuckets);
  return {
    batchSize,
    rolloutSlots: Math.ceil(batchSize / s.cluster.rolloutMachines),
    bucketBytes,
    pullSeconds: bucketBytes / (s.training.weightLinkGBps * 1e9),
  };
}
