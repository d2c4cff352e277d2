export * from './staleness-policy';
export * from './trajectory-input';
export * from './trajectory-store';
export * from './turn-writer';
