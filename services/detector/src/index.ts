export * from './detector.module';
