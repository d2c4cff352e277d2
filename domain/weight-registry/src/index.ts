export * from './weight-registry.state';
export * from './weight-registry.evolve';
export * from './weight-registry.decider';
export * from './pull-scheduler';
export * from './pull-failures';
export * from './relay-set';
export * from './retention';
