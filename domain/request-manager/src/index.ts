export * from './staleness-policy';
