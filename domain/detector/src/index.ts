export * from './detector.decider';
export * from './detector.evolve';
export * from './detection-settings';
export * from './rules';
