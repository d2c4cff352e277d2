export * from './envelope';
export * from './topics';
export * from './define-message';
export * from './catalog';
export * from './create-message';
export * from './json-schemas';
export * from './events/common';
export { RecoveryAction, DecisionRule } from './events/control';
export * from './format-message';
