export * from './orchestrator';
