export * from './scenario';
export * from './random';
export * from './simulate';
export * from './report/report-types';
export * from './report/charts';
export * from './scenarios/paper-workloads';
