export * from './controller.decider';
export * from './controller.evolve';
export * from './controller.decide';
export * from './escalation-rules';
export * from './recovery-commands';
export * from './warm-standby';
export * from './command-outcome';
