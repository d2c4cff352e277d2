export * from './weight-registry.module';
