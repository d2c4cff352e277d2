export * from './request-manager.module';
