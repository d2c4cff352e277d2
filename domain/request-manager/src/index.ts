export * from './staleness-policy';
export * from './training-sample';
