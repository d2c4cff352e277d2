export * from './rollout-manager.module';
export * from './pool';
export * from './router';
