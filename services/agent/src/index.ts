export * from './agent.module';
export * from './agent-config';
export * from './agent-runtime';
export * from './role-process';
export * from './gpu-activity';
export * from './process-tree';
export * from './weights/weight-plane';
export * from './agent-api.controller';
