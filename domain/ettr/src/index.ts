export * from './ettr-view';
export * from './ettr.projection';
export * from './ettr-report';
