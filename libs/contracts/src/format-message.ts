import { RobustrlMessage } from './catalog';

/**
 * One readable line per message, as `robustrl tail` and the embedded demo print it:
 *   <occurredAt> <topic> <type> job=<job> <scalar data fields...>
 * Only scalar fields are shown (nested evidence and arrays are summarised) so a line stays a line.
 */
export function formatMessageLine(message: RobustrlMessage, topic?: string): string {
  const fields: string[] = [];
  for (const [k, v] of Object.entries(message.data as Record<string, unknown>)) {
    if (v === null || v === undefined) continue;
    if (Array.isArray(v)) fields.push(`${k}=[${v.length}]`);
    else if (typeof v === 'object') fields.push(`${k}={${Object.keys(v).join(',')}}`);
    else fields.push(`${k}=${typeof v === 'string' && /\s/.test(v) ? JSON.stringify(truncate(v, 80)) : truncate(String(v), 80)}`);
  }
  const where = topic ? `${topic.replace(/^robustrl\./, '').padEnd(12)} ` : '';
  return `${message.occurredAt} ${where}${message.type.padEnd(24)} job=${message.jobId} ${fields.join(' ')}`.trimEnd();
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}
