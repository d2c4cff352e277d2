export * from './request-manager.module';
export * from '@robustrl/trajectory-store';
export * from './trajectories.controller';
export * from './retention';
