/** The fake Kubernetes API server's request and response plumbing (fake-kubernetes-api-server.ts): selectors, merge patches, replies. */
import { IncomingMessage, ServerResponse } from 'node:http';
import type { WorkloadKind } from './fake-kubernetes-objects';

/** One term of a label selector. */
export type LabelRequirement = { key: string; op: '=' | '!=' | 'exists' | '!exists'; value?: string };

/** Equality-based selectors only (`a=b`, `a==b`, `a!=b`, `a`, `!a`); set-based ones are refused rather than misread. */
export function parseLabelSelector(selector: string): LabelRequirement[] {
  if (selector.trim() === '') return [];
  return selector.split(',').map((part) => {
    const term = part.trim();
    let m: RegExpMatchArray | null;
    if ((m = term.match(/^([^=!\s]+)\s*!=\s*(\S*)$/))) return { key: m[1], op: '!=', value: m[2] };
    if ((m = term.match(/^([^=!\s]+)\s*==?\s*(\S*)$/))) return { key: m[1], op: '=', value: m[2] };
    if ((m = term.match(/^!([^=!\s]+)$/))) return { key: m[1], op: '!exists' };
    if ((m = term.match(/^([^=!\s]+)$/))) return { key: m[1], op: 'exists' };
    throw new Error(`unable to parse requirement: "${term}" (the fake API server supports equality-based selectors only)`);
  });
}

export function matches(requirements: LabelRequirement[], labels: Record<string, string>): boolean {
  return requirements.every((r) => {
    switch (r.op) {
      case '=':
        return labels[r.key] === r.value;
      case '!=':
        return labels[r.key] !== r.value;
      case 'exists':
        return r.key in labels;
      case '!exists':
        return !(r.key in labels);
    }
  });
}

/** RFC 7386 JSON merge patch: objects merge recursively, null deletes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const result: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [key, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/**
 * Why a merge patch is refused, if it is: the wrong content type (415), or a resourceVersion in the
 * patch that is not the object's (409: the API server treats it as an optimistic-concurrency precondition).
 */
export function patchRefusal(
  resource: string,
  name: string,
  resourceVersion: string,
  contentType: string | undefined,
  body: unknown,
): [number, string, string] | undefined {
  if (contentType !== 'application/merge-patch+json' && contentType !== 'application/strategic-merge-patch+json') {
    return [
      415,
      'UnsupportedMediaType',
      'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
    ];
  }
  const expected = (body as { metadata?: { resourceVersion?: string } } | undefined)?.metadata?.resourceVersion;
  if (expected !== undefined && expected !== resourceVersion) {
    return [
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    ];
  }
  return undefined;
}

export function compareRanks(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}

export function workloadKey(kind: WorkloadKind, namespace: string, name: string): string {
  return `${kind}:${namespace}/${name}`;
}

export function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendStatus(res: ServerResponse, code: number, reason: string, message: string): void {
  sendJson(res, code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });
}

export function reasonFor(status: number): string {
  const reasons: Record<number, string> = {
    400: 'BadRequest',
    401: 'Unauthorized',
    403: 'Forbidden',
    404: 'NotFound',
    409: 'Conflict',
    422: 'Invalid',
    429: 'TooManyRequests',
    500: 'InternalError',
    503: 'ServiceUnavailable',
  };
  return reasons[status] ?? 'Unknown';
}
