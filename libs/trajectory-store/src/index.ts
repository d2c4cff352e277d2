export * from './trajectory-store';
export * from './turn-writer';
export * from './migrations';
export * from './group-batch';
export * from './trajectory-reads';
