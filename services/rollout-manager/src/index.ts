export * from './rollout-manager.module';
export * from './pool';
