export * from './detector.module';
export * from './detector.decider';
export * from './detection-settings';
export * from './detector-runtime';
export * from './rules';
