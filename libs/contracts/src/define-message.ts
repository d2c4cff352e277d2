import { z } from 'zod';
import { EnvelopeFields, MessageKind } from './envelope';
import { TopicName } from './topics';

/**
 * One message type: its full envelope schema (with `type` and `schemaVersion` pinned to literals,
 * so the catalog is a discriminated union) plus where it is published.
 */
export interface MessageDefinition<Type extends string = string, Kind extends MessageKind = MessageKind, Data extends z.ZodType = z.ZodType> {
  readonly type: Type;
  readonly kind: Kind;
  readonly schemaVersion: number;
  readonly topic: TopicName;
  readonly description: string;
  readonly data: Data;
  readonly schema: z.ZodObject<
    Omit<typeof EnvelopeFields, 'type' | 'kind'> & {
      type: z.ZodLiteral<Type>;
      kind: z.ZodLiteral<Kind>;
      data: Data;
    }
  >;
}

export function defineMessage<Type extends string, Kind extends MessageKind, Data extends z.ZodType>(def: {
  type: Type;
  kind: Kind;
  schemaVersion: number;
  topic: TopicName;
  description: string;
  data: Data;
}): MessageDefinition<Type, Kind, Data> {
  const schema = z
    .object({
      ...EnvelopeFields,
      type: z.literal(def.type),
      kind: z.literal(def.kind),
      schemaVersion: z.literal(def.schemaVersion),
      data: def.data,
    })
    .meta({ id: def.type, description: def.description });
  return { ...def, schema: schema as unknown as MessageDefinition<Type, Kind, Data>['schema'] };
}

export const event = <Type extends string, Data extends z.ZodType>(type: Type, topic: TopicName, description: string, data: Data, schemaVersion = 1) =>
  defineMessage({ type, kind: 'event', schemaVersion, topic, description, data });

export const command = <Type extends string, Data extends z.ZodType>(type: Type, topic: TopicName, description: string, data: Data, schemaVersion = 1) =>
  defineMessage({ type, kind: 'command', schemaVersion, topic, description, data });
