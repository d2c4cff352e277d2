export * from './message-bus';
export * from './dead-letter';
export * from './outbound';
export * from './inbound';
export * from './in-process/in-process-bus';
export * from './in-process/partitioner';
export * from './kafka/kafka-bus';
export * from './bus-config';
