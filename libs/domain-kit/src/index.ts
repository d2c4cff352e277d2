export * from './decider';
export * from './job-command';
export * from './step';
export * from './decider-run';
export * from './specification';
export * from './state-codec';
