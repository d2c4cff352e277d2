export * from './detector.decider';
export * from './detection-settings';
export * from './rules';
