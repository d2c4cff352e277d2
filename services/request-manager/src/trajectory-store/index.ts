export * from './trajectory-store';
export * from './turn-writer';
