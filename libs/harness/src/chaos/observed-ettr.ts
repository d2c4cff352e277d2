/**
 * ETTR as the campaign observes it, independently of the control plane: not from robustrl's events or
 * its ETTR projection (domain/ettr), but from what the job's processes do — each second, whether each
 * machine's engine answers its own health check, whether each trainer rank's process is alive and has
 * loaded its state (its `ready` ledger line), and when the job last completed a sample (its ledger) — the
 * paper's definition (§7) applied to that: a GPU counts as effective while its role serves and does not
 * wait on a role that is down.
 *
 * - a trainer machine is effective while its rank is up, every rank of the group is up, and an engine
 *   serves (a group training its last batch while every engine is down counts as waiting: the seconds
 *   that undercounts are few);
 * - a rollout machine is effective while its engine serves and the trainer group is whole, or while the
 *   group is not but that engine itself still generates (the loops run ahead by the staleness bound): an
 *   engine idle because the trainer is down waits on a dead role, whatever its neighbour does. Where the
 *   engines' own counters were not read (`enginesGenerating` absent), samples completing stand for it;
 * - anything else — starting, restarting, dead, replaced, waiting on the other role — is lost.
 *
 * Pure: samples in, the ratio out. `system-chaos.ts` takes the samples; the check compares the ratio
 * with the projection's.
 */
export interface ObservedSample {
  /** ms since the epoch. */
  at: number;
  /** Trainer ranks whose process is alive and has loaded its state. */
  trainersUp: number;
  /** Engines that answered their health check. */
  enginesUp: number;
  /** Whether the job completed a sample within the last `recentMs`. */
  samplesFlowing: boolean;
  /**
   * Of the engines up, those that generated within the last `recentMs` by their own counters (vLLM's
   * running requests and finished-request count); absent where no engine exports them (a stand-in).
   */
  enginesGenerating?: number;
}

export interface ObservedEttr {
  ettr: number;
  /** GPU-seconds in the window, and the effective ones. */
  gpuSeconds: number;
  effectiveGpuSeconds: number;
}

/** `gpus`: the job's machines (trainers + rollouts), one GPU each; each sample stands for the time until the next. */
export function observedEttr(samples: readonly ObservedSample[], shape: { trainers: number; rollouts: number }): ObservedEttr {
  const gpus = shape.trainers + shape.rollouts;
  let total = 0;
  let effective = 0;
  for (let i = 0; i + 1 < samples.length; i++) {
    const s = samples[i];
    const dt = (samples[i + 1].at - s.at) / 1000;
    if (dt <= 0) continue;
    const groupWhole = s.trainersUp >= shape.trainers;
    const trainersEffective = groupWhole && s.enginesUp > 0 ? shape.trainers : 0;
    const working = s.enginesGenerating ?? (s.samplesFlowing ? s.enginesUp : 0);
    const enginesEffective = Math.min(groupWhole ? s.enginesUp : working, shape.rollouts);
    total += gpus * dt;
    effective += (trainersEffective + enginesEffective) * dt;
  }
  return { ettr: total > 0 ? effective / total : 1, gpuSeconds: Math.round(total), effectiveGpuSeconds: Math.round(effective) };
}
