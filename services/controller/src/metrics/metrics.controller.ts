import { Controller, Get, Header, Inject } from '@nestjs/common';
import { RecoveryMetrics } from './recovery-metrics';

@Controller()
export class MetricsController {
  constructor(@Inject(RecoveryMetrics) private readonly metrics: RecoveryMetrics) {}

  @Get('metrics')
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  metricsText(): Promise<string> {
    return this.metrics.text();
  }
}
