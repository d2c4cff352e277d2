export * from './trajectory-store';
export * from './trajectory-errors';
export * from './trajectory-events';
export * from './turn-writer';
export * from './migrations';
export * from './group-batch';
export * from './trajectory-reads';
