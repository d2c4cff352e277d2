import { DataOf, MessageOf, MessageType } from './catalog';

/**
 * What a decider emits: a message's type and data, without the envelope. The shell (service or
 * simulator) adds the envelope — event id, job, source, time, causation, trace — so the domain
 * code stays free of clocks, ids and I/O.
 */
export type Draft<T extends MessageType = MessageType> = { [K in T]: { type: K; data: DataOf<K> } }[T];

export function draft<T extends MessageType>(type: T, data: DataOf<T>): Draft<T> {
  return { type, data } as Draft<T>;
}

/** Narrow a message to one of the given types (for deciders that accept a subset of the catalog). */
export function isOneOf<T extends MessageType>(message: { type: string }, types: readonly T[]): message is MessageOf<T> {
  return (types as readonly string[]).includes(message.type);
}
