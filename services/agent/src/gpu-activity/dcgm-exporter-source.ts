import { clampUnit, describeCause, GpuActivityReading, GpuActivitySource, GpuActivitySourceError, isErrorLike, readingFromPerGpu } from './gpu-activity-source';

export const DCGM_TENSOR_ACTIVE_METRIC = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE';

export interface DcgmExporterSourceOptions {
  /** dcgm-exporter's metrics endpoint, e.g. http://127.0.0.1:9400/metrics. */
  url: string;
  /** A scrape slower than this fails; dcgm-exporter answers from its cache, so seconds means trouble. */
  timeoutMs?: number;
}

/** Scrapes dcgm-exporter: the source the trainer rule is defined on (tensor-pipe activity, paper §4). */
export class DcgmExporterSource implements GpuActivitySource {
  readonly kind = 'dcgm' as const;
  readonly url: string;
  private readonly timeoutMs: number;

  constructor(options: DcgmExporterSourceOptions) {
    let url: URL;
    try {
      url = new URL(options.url);
    } catch (err) {
      throw new GpuActivitySourceError('dcgm', options.url, 'not a valid URL', { cause: err });
    }
    // `localhost:9400` parses as a URL with scheme `localhost:`; say so here rather than as a fetch error later.
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new GpuActivitySourceError('dcgm', options.url, `not an http(s) URL (scheme '${url.protocol}')`);
    }
    this.url = url.href;
    this.timeoutMs = options.timeoutMs ?? 2_000;
  }

  async sample(): Promise<GpuActivityReading> {
    const text = await this.scrape();
    try {
      return parseDcgmTensorActive(text);
    } catch (err) {
      throw new GpuActivitySourceError('dcgm', this.url, describeCause(err), { cause: err });
    }
  }

  private async scrape(): Promise<string> {
    try {
      // The timeout covers the body too: the same signal aborts the read below.
      const response = await fetch(this.url, { signal: AbortSignal.timeout(this.timeoutMs), headers: { accept: 'text/plain' } });
      const body = await response.text();
      if (!response.ok) {
        const excerpt = body.trim().slice(0, 200);
        throw new GpuActivitySourceError('dcgm', this.url, `HTTP ${response.status} ${response.statusText}${excerpt ? `: ${excerpt}` : ''}`);
      }
      return body;
    } catch (err) {
      if (err instanceof GpuActivitySourceError) throw err;
      throw new GpuActivitySourceError('dcgm', this.url, this.whyScrapeFailed(err), { cause: err });
    }
  }

  private whyScrapeFailed(err: unknown): string {
    if (isErrorLike(err) && (err.name === 'TimeoutError' || err.name === 'AbortError')) return `no answer within ${this.timeoutMs} ms`;
    // fetch() reports every network failure as "fetch failed"; the useful part (ECONNREFUSED...) is the cause.
    if (isErrorLike(err) && err.cause !== undefined) return `cannot reach the exporter: ${describeCause(err.cause)}`;
    return describeCause(err);
  }
}

/** One sample line of the Prometheus text format. */
export interface PrometheusSample {
  labels: Record<string, string>;
  value: number;
  lineNumber: number;
}

/**
 * Reads DCGM_FI_PROF_PIPE_TENSOR_ACTIVE out of a dcgm-exporter scrape (Prometheus text exposition
 * format): one sample per GPU, labelled `gpu="N"`, value a ratio 0..1. Throws with a reason when the
 * metric is missing, a sample is malformed, or a value is not a measured ratio.
 *
 * Samples sharing a `gpu` label are MIG instances of one GPU; the GPU reads as the busiest of them.
 * Whether the GPU is at zero (what the trainer rule asks) comes out the same as with a mean, and a
 * job confined to one instance is not diluted by its idle siblings.
 *
 * NaN (DCGM has no profiling data, e.g. while Nsight holds the counters) fails the whole reading
 * rather than being read as 0 or dropped: 0 would make a healthy trainer look hung, and dropping the
 * GPU would shift `perGpu` indexes and let the other GPUs speak for one nobody measured.
 */
export function parseDcgmTensorActive(text: string): GpuActivityReading {
  const samples = parsePrometheusSamples(text, DCGM_TENSOR_ACTIVE_METRIC);
  if (samples.length === 0) {
    const declared = new RegExp(`^#\\s*(HELP|TYPE)\\s+${DCGM_TENSOR_ACTIVE_METRIC}\\s`, 'm').test(text);
    throw new Error(
      declared
        ? `${DCGM_TENSOR_ACTIVE_METRIC} is declared but has no samples: DCGM reports no GPU for it (profiling module not loaded?)`
        : `${DCGM_TENSOR_ACTIVE_METRIC} is not in the exporter output: dcgm-exporter exports profiling metrics only when listed in its counters CSV (-f)`,
    );
  }

  const byGpu = new Map<string, number>();
  const unmeasured: string[] = [];
  for (const sample of samples) {
    const gpu = sample.labels['gpu'];
    if (gpu === undefined || gpu === '') throw new Error(`line ${sample.lineNumber}: ${DCGM_TENSOR_ACTIVE_METRIC} sample without a gpu label`);
    if (Number.isNaN(sample.value)) {
      unmeasured.push(gpu);
      continue;
    }
    // DCGM reports a ratio; allow float noise past the ends, reject anything that is clearly not a ratio (a percent).
    if (!(sample.value >= -1e-6 && sample.value <= 1 + 1e-6)) {
      throw new Error(`line ${sample.lineNumber}: GPU ${gpu} reports ${sample.value}, not a ratio 0..1`);
    }
    byGpu.set(gpu, Math.max(byGpu.get(gpu) ?? 0, clampUnit(sample.value)));
  }
  if (unmeasured.length > 0) {
    throw new Error(`no measurement (NaN) for GPU ${[...new Set(unmeasured)].join(', ')}: DCGM profiling counters unavailable (another profiler attached?)`);
  }

  const gpus = [...byGpu.keys()].sort(compareGpuLabels);
  return readingFromPerGpu(gpus.map((gpu) => byGpu.get(gpu)!));
}

/** Numeric GPU indexes in numeric order ("10" after "9"); anything else after them, as text. */
function compareGpuLabels(a: string, b: string): number {
  const na = /^\d+$/.test(a) ? Number(a) : Number.POSITIVE_INFINITY;
  const nb = /^\d+$/.test(b) ? Number(b) : Number.POSITIVE_INFINITY;
  return na !== nb ? na - nb : a.localeCompare(b);
}

/**
 * The samples of one metric in a Prometheus text exposition. Only lines of that metric are parsed in
 * full, so a malformed line of some other metric does not cost us the reading.
 */
export function parsePrometheusSamples(text: string, metric: string): PrometheusSample[] {
  const samples: PrometheusSample[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    const nameEnd = line.search(/[{\s]/);
    const name = nameEnd === -1 ? line : line.slice(0, nameEnd);
    if (name !== metric) continue;
    try {
      samples.push({ ...parseSampleLine(line, name.length), lineNumber: i + 1 });
    } catch (err) {
      throw new Error(`line ${i + 1}: malformed ${metric} sample (${describeCause(err)}): ${line.slice(0, 200)}`);
    }
  }
  return samples;
}

function parseSampleLine(line: string, start: number): { labels: Record<string, string>; value: number } {
  let pos = start;
  const labels: Record<string, string> = {};
  const skipSpaces = () => {
    while (line[pos] === ' ' || line[pos] === '\t') pos++;
  };

  skipSpaces();
  if (line[pos] === '{') {
    pos++;
    for (;;) {
      skipSpaces();
      if (line[pos] === '}') break;
      const nameMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(pos));
      if (!nameMatch) throw new Error(`expected a label name at column ${pos + 1}`);
      const labelName = nameMatch[0];
      pos += labelName.length;
      skipSpaces();
      if (line[pos] !== '=') throw new Error(`expected '=' after label ${labelName}`);
      pos++;
      skipSpaces();
      if (line[pos] !== '"') throw new Error(`expected '"' to open the value of label ${labelName}`);
      pos++;
      let value = '';
      for (;;) {
        const ch = line[pos];
        if (ch === undefined) throw new Error(`unterminated value of label ${labelName}`);
        pos++;
        if (ch === '"') break;
        if (ch === '\\') {
          const escaped = line[pos++];
          // The format defines \\, \" and \n; keep any other escape as written rather than guess.
          value += escaped === 'n' ? '\n' : escaped === '\\' || escaped === '"' ? escaped : `\\${escaped ?? ''}`;
        } else {
          value += ch;
        }
      }
      labels[labelName] = value;
      skipSpaces();
      if (line[pos] === ',') {
        pos++;
        continue;
      }
      if (line[pos] !== '}') throw new Error(`expected ',' or '}' after label ${labelName}`);
    }
    pos++;
  }

  // Value, then an optional timestamp in ms that we ignore: dcgm-exporter does not send one.
  const fields = line
    .slice(pos)
    .trim()
    .split(/[ \t]+/);
  if (fields[0] === undefined || fields[0] === '') throw new Error('no value');
  if (fields.length > 2) throw new Error('unexpected text after the value and timestamp');
  return { labels, value: parsePrometheusValue(fields[0]) };
}

/** Go's float syntax as Prometheus writes it, including NaN and ±Inf (which Number() does not spell the same). */
function parsePrometheusValue(token: string): number {
  if (/^nan$/i.test(token)) return Number.NaN;
  const inf = /^([+-]?)inf(inity)?$/i.exec(token);
  if (inf) return inf[1] === '-' ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(token)) throw new Error(`value '${token}' is not a number`);
  return Number(token);
}
