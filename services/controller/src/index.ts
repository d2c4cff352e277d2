export * from './controller.module';
export * from './executor/departure-relay';
export * from './executor/recovery-executor';
export * from './metrics/recovery-metrics';
export * from './controller-config';
export * from './ettr/ettr-settings';
