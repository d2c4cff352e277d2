import { Controller, Get, Header, Inject } from '@nestjs/common';
import { Registry } from 'prom-client';
import { METRICS_REGISTRY } from './tokens';

/** `GET /metrics`: the process's Prometheus registry (the bus's metrics, and whatever its services register). */
@Controller()
export class MetricsController {
  constructor(@Inject(METRICS_REGISTRY) private readonly registry: Registry) {}

  @Get('metrics')
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  metricsText(): Promise<string> {
    return this.registry.metrics();
  }
}
