export * from './weight-registry.module';
export * from './registry';
