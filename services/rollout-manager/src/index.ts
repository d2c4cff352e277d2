export * from './rollout-manager.module';
