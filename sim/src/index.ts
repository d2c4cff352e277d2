export * from './scenario';
export * from './random';
export * from './simulate';
export * from './report/report-types';
export * from './report/charts';
export * from './scenarios/paper-workloads';
export * from './cluster/cluster-environment';
export { EmulatedCluster } from './cluster/emulated-cluster';
