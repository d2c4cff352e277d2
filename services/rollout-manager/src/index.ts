export * from './rollout-manager.module';
export * from './router';
export * from './router-runtime';
export * from './router-config';
export * from './elastic/pool-scaler';
