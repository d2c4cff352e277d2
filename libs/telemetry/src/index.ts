export * from './trace-context';
export * from './setup';
export * from './in-memory-tracing';
export * from './synchronous-context';
