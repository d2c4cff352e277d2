export * from './decider';
export * from './specification';
