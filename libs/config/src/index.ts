export * from './registry';
export * from './readers';
export * from './reference';
