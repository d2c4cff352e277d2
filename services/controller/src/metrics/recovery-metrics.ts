import { Inject, Injectable } from '@nestjs/common';
import { Counter, Histogram, Registry } from 'prom-client';
import { RobustrlMessage } from '@robustrl/contracts';
import { METRICS_REGISTRY } from '@robustrl/service-kit';

/**
 * Prometheus metrics of recoveries, fed by the controller's own decisions and completions:
 * `robustrl_recovery_stage_seconds{stage,outcome}` (detect, decide, restart, reconnect),
 * `robustrl_recovery_seconds{outcome}` end to end, and `robustrl_recovery_decisions_total{action,rule}`,
 * in the process's registry (the service kit serves it at `/metrics`, beside the bus's metrics).
 */
@Injectable()
export class RecoveryMetrics {
  private readonly stage: Histogram;
  private readonly total: Histogram;
  private readonly decisions: Counter;

  constructor(@Inject(METRICS_REGISTRY) readonly registry: Registry) {
    // Buckets from a second (an in-place restart of a small model) to an hour (a task restart at scale).
    const buckets = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600];
    this.stage = new Histogram({
      name: 'robustrl_recovery_stage_seconds',
      help: 'Recovery latency per stage (detect, decide, restart, reconnect)',
      labelNames: ['stage', 'outcome'],
      buckets,
      registers: [registry],
    });
    this.total = new Histogram({
      name: 'robustrl_recovery_seconds',
      help: 'Recovery latency from fault evidence to reconnected role',
      labelNames: ['outcome'],
      buckets,
      registers: [registry],
    });
    this.decisions = new Counter({
      name: 'robustrl_recovery_decisions_total',
      help: 'Recovery decisions by action and the rule that fired',
      labelNames: ['action', 'rule'],
      registers: [registry],
    });
  }

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
