export * from './trajectory-recorder';
export * from './trajectory-identity';
export * from './engine-pool';
export * from './turn-plan';
export * from './stream-splice';
export * from './openai-router';
export * from './http-trajectory-recorder';
export * from './throughput-meter';
