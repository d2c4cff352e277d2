export * from './agent.module';
