export * from './data-source';
export * from './event-log';
export * from './checkpoints';
export * from './event-store';
export * from './migrations';
export * from './pglite/pglite-pool';
export * from './inbox';
export * from './outbox';
