import { Counter, Histogram, Registry } from 'prom-client';
import { RobustrlMessage } from '@robustrl/contracts';

/**
 * Prometheus metrics of recoveries, fed by the controller's own decisions and completions:
 * `robustrl_recovery_stage_seconds{stage,outcome}` (detect, decide, restart, reconnect),
 * `robustrl_recovery_seconds{outcome}` end to end, and `robustrl_recovery_decisions_total{action,rule}`.
 */
export class RecoveryMetrics {
  readonly registry = new Registry();
  // Buckets from a second (an in-place restart of a small model) to an hour (a task restart at scale).
  private readonly buckets = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600];
  private readonly stage = new Histogram({
    name: 'robustrl_recovery_stage_seconds',
    help: 'Recovery latency per stage (detect, decide, restart, reconnect)',
    labelNames: ['stage', 'outcome'],
    buckets: this.buckets,
    registers: [this.registry],
  });
  private readonly total = new Histogram({
    name: 'robustrl_recovery_seconds',
    help: 'Recovery latency from fault evidence to reconnected role',
    labelNames: ['outcome'],
    buckets: this.buckets,
    registers: [this.registry],
  });
  private readonly decisions = new Counter({
    name: 'robustrl_recovery_decisions_total',
    help: 'Recovery decisions by action and the rule that fired',
    labelNames: ['action', 'rule'],
    registers: [this.registry],
  });

  observe(messages: readonly RobustrlMessage[]): void {
    for (const m of messages) {
      if (m.type === 'RecoveryDecided') this.decisions.inc({ action: m.data.action, rule: m.data.rule });
      if (m.type === 'RecoveryCompleted') {
        const s = m.data.stagesMs;
        for (const [stage, ms] of Object.entries(s)) this.stage.observe({ stage, outcome: m.data.outcome }, ms / 1000);
        this.total.observe({ outcome: m.data.outcome }, (s.detect + s.decide + s.restart + s.reconnect) / 1000);
      }
    }
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
