export * from './rollout-pool.decider';
