/**
 * A cloud's notice that this machine is about to go — a spot or preemptible VM reclaimed, a host
 * maintenance that stops it — read from the instance's metadata endpoint (docs/integrators/agent-api.md "Cloud notices": a
 * notice is evidence, reported as `node-draining` with its deadline). Pure: a source's answer in, the
 * notice it gives (or none) out. Each format is the provider's documented one:
 *  - `aws-spot`: EC2's `spot/instance-action`, 404 until the instance is marked, then
 *    `{"action": "terminate" | "stop" | "hibernate", "time": "<ISO 8601 UTC>"}` (two minutes ahead);
 *  - `gce-preempted`: Compute Engine's `instance/preempted`, `TRUE` once a preemption began (about 30 s
 *    before the VM stops; header `Metadata-Flavor: Google`);
 *  - `gce-maintenance`: Compute Engine's `instance/maintenance-event`; `TERMINATE_ON_HOST_MAINTENANCE`
 *    stops the VM (60 s notice), `MIGRATE_ON_HOST_MAINTENANCE` live-migrates it and is not a departure;
 *  - `azure`: Azure's Scheduled Events (`metadata/scheduledevents`, header `Metadata: true`), events of
 *    type Preempt, Terminate, Reboot or Redeploy for this VM, each with its `NotBefore` (Freeze, a pause
 *    of seconds, is not a departure).
 */
export const NOTICE_FORMATS = ['aws-spot', 'gce-preempted', 'gce-maintenance', 'azure'] as const;
export type NoticeFormat = (typeof NOTICE_FORMATS)[number];

/** Where one kind of notice is read. */
export interface NoticeSource {
  format: NoticeFormat;
  url: string;
}

export interface CloudNotice {
  /** What the provider said, in its words (the detail names it). */
  what: string;
  /** When the machine goes, as the provider says or documents it. */
  deadline: Date;
  /** Names this notice across polls: the same notice read again is not a second one. */
  key: string;
}

/** Documented notice lengths where the answer carries no time (Compute Engine). */
export const GCE_PREEMPTION_NOTICE_MS = 30_000;
export const GCE_TERMINATION_NOTICE_MS = 60_000;

/** The request headers a source's metadata server asks for. */
export function noticeHeaders(format: NoticeFormat): Record<string, string> {
  if (format === 'gce-preempted' || format === 'gce-maintenance') return { 'Metadata-Flavor': 'Google' };
  if (format === 'azure') return { Metadata: 'true' };
  return {};
}

const AZURE_DEPARTURES = new Set(['Preempt', 'Terminate', 'Reboot', 'Redeploy']);

/**
 * The notice in a source's answer, or null when it gives none. Throws with the reason on an answer that
 * is not the format's (the watcher reports it once and keeps polling).
 */
export function readNotice(
  format: NoticeFormat,
  answer: { status: number; body: string },
  now: Date,
  /** Azure: this VM's name, as Scheduled Events list it in `Resources`. */
  vmName?: string,
): CloudNotice | null {
  const { status, body } = answer;
  if (format === 'aws-spot') {
    if (status === 404) return null;
    if (status !== 200) throw new Error(`answered ${status}`);
    const parsed = json(body) as { action?: unknown; time?: unknown };
    if (typeof parsed.action !== 'string' || typeof parsed.time !== 'string') throw new Error('no "action" and "time" in the instance action');
    const deadline = date(parsed.time);
    return { what: `EC2 spot instance action '${parsed.action}'`, deadline, key: `aws/${parsed.action}/${deadline.toISOString()}` };
  }
  if (status !== 200) throw new Error(`answered ${status}`);
  if (format === 'gce-preempted') {
    const value = body.trim().toUpperCase();
    if (value === 'FALSE') return null;
    if (value !== 'TRUE') throw new Error(`'${body.trim().slice(0, 40)}' is neither TRUE nor FALSE`);
    return { what: 'Compute Engine preemption', deadline: new Date(now.getTime() + GCE_PREEMPTION_NOTICE_MS), key: 'gce/preempted' };
  }
  if (format === 'gce-maintenance') {
    const value = body.trim();
    if (value === 'NONE' || value.startsWith('MIGRATE')) return null;
    if (!value.startsWith('TERMINATE')) throw new Error(`unknown maintenance event '${value.slice(0, 40)}'`);
    return { what: `Compute Engine maintenance event ${value}`, deadline: new Date(now.getTime() + GCE_TERMINATION_NOTICE_MS), key: `gce/${value}` };
  }
  const parsed = json(body) as { Events?: unknown };
  if (!Array.isArray(parsed.Events)) throw new Error('no "Events" list in the scheduled events');
  for (const event of parsed.Events as Array<Record<string, unknown>>) {
    if (typeof event.EventType !== 'string' || !AZURE_DEPARTURES.has(event.EventType)) continue;
    const resources = Array.isArray(event.Resources) ? event.Resources.filter((r): r is string => typeof r === 'string') : [];
    if (vmName !== undefined && resources.length > 0 && !resources.includes(vmName)) continue;
    // An event already started has an empty NotBefore: it is happening now.
    const notBefore = typeof event.NotBefore === 'string' && event.NotBefore.trim() !== '' ? date(event.NotBefore) : now;
    return { what: `Azure scheduled event ${event.EventType}`, deadline: notBefore, key: `azure/${String(event.EventId ?? event.EventType)}` };
  }
  return null;
}

/** The detail of the `node-draining` signal: who said so, by when (the detector's evidence, read by people). */
export function noticeDetail(notice: CloudNotice, now: Date): string {
  const seconds = Math.max(0, Math.round((notice.deadline.getTime() - now.getTime()) / 1000));
  return `${notice.what}: this machine goes by ${notice.deadline.toISOString()} (in ${seconds} s)`;
}

/** `format=url,format=url` (ROBUSTRL_AGENT_NOTICES): each source checked; a clear error naming the bad part. */
export function parseNoticeSources(text: string): NoticeSource[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const eq = part.indexOf('=');
      const format = part.slice(0, Math.max(0, eq)).trim();
      const url = part.slice(eq + 1).trim();
      if (eq < 0 || !(NOTICE_FORMATS as readonly string[]).includes(format))
        throw new Error(`ROBUSTRL_AGENT_NOTICES: '${part}' is not format=url with a format of ${NOTICE_FORMATS.join(', ')}`);
      if (!/^https?:\/\/[^\s]+$/.test(url)) throw new Error(`ROBUSTRL_AGENT_NOTICES: '${url}' is not an http(s) URL`);
      return { format: format as NoticeFormat, url };
    });
}

function json(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    throw new Error('not JSON');
  }
}

function date(text: string): Date {
  const d = new Date(text);
  if (Number.isNaN(d.getTime())) throw new Error(`'${text}' is not a time`);
  return d;
}
