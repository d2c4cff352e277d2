export * from './controller-state';
export * from './controller.decider';
export * from './escalation-rules';
export * from './warm-standby';
