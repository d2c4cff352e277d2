export * from './rollout-manager.module';
export * from './pool';
export * from './router';
export * from './router-runtime';
