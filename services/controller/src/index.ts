export * from './controller.module';
