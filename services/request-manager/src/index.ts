export * from './request-manager.module';
export * from './trajectory-store';
export * from './trajectories.controller';
export * from './retention';
export * from './migrations';
