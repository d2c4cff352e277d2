import { z } from 'zod';
import { MessageCatalog } from './catalog';
import { AnyEnvelope } from './envelope';

/**
 * The JSON Schema files checked in under `schemas/`: one per message type plus the envelope.
 * Pure (no I/O) so a test can compare them with the files on disk and fail when they are stale.
 */
export function renderJsonSchemas(): Map<string, string> {
  const files = new Map<string, string>();
  const render = (schema: z.ZodType) => JSON.stringify(z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output' }), null, 2) + '\n';
  files.set('envelope.schema.json', render(AnyEnvelope));
  for (const def of Object.values(MessageCatalog)) {
    files.set(`${def.kind}s/${def.type}.v${def.schemaVersion}.schema.json`, render(def.schema));
  }
  const index = Object.values(MessageCatalog).map((d) => ({
    type: d.type,
    kind: d.kind,
    schemaVersion: d.schemaVersion,
    topic: d.topic,
    description: d.description,
    schema: `${d.kind}s/${d.type}.v${d.schemaVersion}.schema.json`,
  }));
  files.set('index.json', JSON.stringify(index, null, 2) + '\n');
  return files;
}
