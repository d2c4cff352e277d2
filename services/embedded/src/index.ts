export * from './main-job-config';
