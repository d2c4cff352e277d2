export * from './rollout-pool.decider';
export * from './scale-plan';
export * from './trajectory-table';
