/**
 * bench:router's load generator, a process of its own (its CPU is measured apart from the router's): a
 * closed loop of `concurrency` workers, each sending its next request as soon as the previous answer is
 * read to the end, over keep-alive connections (Node sets TCP_NODELAY on them). A warm-up, then a timed
 * window; what completes inside the window counts.
 *
 *   node bench/dist/router/load-generator.js '<LoadConfig as JSON>'
 *
 * Prints LoadEvent lines on stdout: `window-start` and `window-end` as they happen (the bench reads the
 * processes' CPU then), and `result` last.
 */
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { answerOf, chatBody, checkComplete, firstMessages, LoadConfig, LoadEvent, Message, nextMessages } from './workloads';

const REQUEST_TIMEOUT_MS = 60_000;
/** After a failure a worker waits this long: a target that refuses at once must not turn the loop into a spin. */
const ERROR_PAUSE_MS = 20;

interface Outcome {
  status: number;
  body: string;
}

function post(agent: Agent, url: URL, body: string, headers: Record<string, string>): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (b: Buffer) => parts.push(b));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
        res.on('error', reject);
        res.on('aborted', () => reject(new Error('response aborted')));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer in ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

function emit(event: LoadEvent): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

/** Nearest-rank percentile of values sorted ascending. */
function percentileOf(sorted: Float64Array, p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

async function run(config: LoadConfig): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: config.concurrency });
  const urls = config.urls.map((u) => new URL(u));
  const turns = config.workload === 'multi-turn' ? config.turns : 1;
  const start = performance.now();
  const windowStart = start + config.warmupSeconds * 1000;
  const windowEnd = windowStart + config.seconds * 1000;
  setTimeout(() => emit({ event: 'window-start' }), Math.max(0, windowStart - performance.now()));
  // The workers may see the window's end before its timer runs (an answer read just after it, then the
  // result and the exit): whichever comes first says it, once.
  let windowEnded = false;
  const endWindow = () => {
    if (windowEnded) return;
    windowEnded = true;
    emit({ event: 'window-end' });
  };
  const windowTimer = setTimeout(endWindow, Math.max(0, windowEnd - performance.now()));

  let latencies = new Float64Array(1 << 16);
  let counted = 0;
  let errors = 0;
  const errorSamples = new Set<string>();
  let nextUrl = 0;
  let nextTrajectory = 0;

  const worker = async (w: number): Promise<void> => {
    let messages: Message[] = [];
    let turn = 0;
    let promptId = '';
    while (performance.now() < windowEnd) {
      if (turn === 0) {
        promptId = `${config.runId}-w${w}-${nextTrajectory++}`;
        messages = firstMessages(promptId);
      }
      const headers = {
        [config.headers.job]: config.jobId,
        [config.headers.prompt]: promptId,
        [config.headers.sample]: '0',
        [config.headers.batch]: config.runId,
        [config.headers.step]: '0',
      };
      const url = urls[nextUrl++ % urls.length];
      const t0 = performance.now();
      let failure: string | null = null;
      let answer = '';
      try {
        const { status, body } = await post(agent, url, chatBody(messages, config.stream), headers);
        if (status !== 200) throw new Error(`HTTP ${status}: ${body.slice(0, 200)}`);
        // The text is parsed only where the next turn needs it; otherwise the answer is only checked complete.
        if (turn + 1 < turns) answer = answerOf(body, config.stream);
        else checkComplete(body, config.stream);
      } catch (err) {
        failure = err instanceof Error ? err.message : String(err);
      }
      const t1 = performance.now();
      const inWindow = t1 >= windowStart && t1 < windowEnd;
      if (failure !== null) {
        if (inWindow) errors += 1;
        if (errorSamples.size < 5) errorSamples.add(failure);
        turn = 0;
        await new Promise((r) => setTimeout(r, ERROR_PAUSE_MS));
        continue;
      }
      if (inWindow) {
        if (counted === latencies.length) {
          const grown = new Float64Array(latencies.length * 2);
          grown.set(latencies);
          latencies = grown;
        }
        latencies[counted++] = t1 - t0;
      }
      if (turn + 1 < turns) {
        messages = nextMessages(messages, answer, turn + 1);
        turn += 1;
      } else turn = 0;
    }
  };

  await Promise.all(Array.from({ length: config.concurrency }, (_, w) => worker(w)));
  clearTimeout(windowTimer);
  endWindow();
  const sorted = latencies.slice(0, counted).sort();
  emit({
    event: 'result',
    result: {
      requests: counted,
      seconds: config.seconds,
      requestsPerSecond: counted / config.seconds,
      p50Ms: percentileOf(sorted, 50),
      p99Ms: percentileOf(sorted, 99),
      errors,
      errorSamples: [...errorSamples],
    },
  });
  agent.destroy();
}

run(JSON.parse(process.argv[2] ?? '{}') as LoadConfig).then(
  () => process.stdout.write('', () => process.exit(0)),
  (err: unknown) => {
    process.stderr.write(`[load-generator] FAILED: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
