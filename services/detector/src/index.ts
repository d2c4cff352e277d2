export * from './detector.module';
export * from './detector-runtime';
