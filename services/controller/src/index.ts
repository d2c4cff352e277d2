export * from './controller.module';
export * from './recovery';
export * from './executor/recovery-executor';
export * from './metrics/recovery-metrics';
