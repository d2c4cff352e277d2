export * from './rollout-pool.decider';
export * from './rollout-pool.evolve';
export * from './rollout-pool.decide';
export * from './scale-plan';
export * from './trajectory-table';
export * from './weight-readiness';
