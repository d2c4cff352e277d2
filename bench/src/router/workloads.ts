/**
 * The two workloads of bench:router, as the load generator sends them: `single`, each request a new
 * trajectory with one user message (throughput), and `multi-turn`, trajectories of several turns where
 * each turn carries the conversation so far, the answers received included (prefix-cache affinity).
 */

export const WORKLOADS = ['single', 'multi-turn'] as const;
export type Workload = (typeof WORKLOADS)[number];

export interface Message {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** The names of the trajectory identity headers (the router's IDENTITY_HEADERS, handed over by the bench). */
export interface IdentityHeaderNames {
  job: string;
  prompt: string;
  sample: string;
  batch: string;
  step: string;
}

/** What one load-generator process runs: a closed loop at one level against one target. */
export interface LoadConfig {
  /** One URL: a router; several: the load generator spreads requests over them itself (round robin). */
  urls: string[];
  workload: Workload;
  stream: boolean;
  concurrency: number;
  warmupSeconds: number;
  seconds: number;
  /** Turns of a multi-turn trajectory. */
  turns: number;
  jobId: string;
  /** Unique to this run and level: prompt ids (and so trajectory ids) never repeat across runs. */
  runId: string;
  headers: IdentityHeaderNames;
}

export interface LoadResult {
  /** Requests completed inside the timed window. */
  requests: number;
  seconds: number;
  requestsPerSecond: number;
  p50Ms: number | null;
  p99Ms: number | null;
  errors: number;
  /** The first few distinct errors, to tell why. */
  errorSamples: string[];
}

/** Lines a load generator prints on stdout, one JSON object each. */
export type LoadEvent = { event: 'window-start' } | { event: 'window-end' } | { event: 'result'; result: LoadResult };

const FILLER =
  'Solve the problem step by step. Show the intermediate results, call the python tool when a computation is ' +
  'long, and give the final answer in a box. Keep the reasoning short and check each step before the next one.';

/** A new trajectory's first messages: its prompt. */
export function firstMessages(promptId: string): Message[] {
  return [
    { role: 'system', content: 'You are a careful math assistant.' },
    { role: 'user', content: `Problem ${promptId}: ${FILLER}` },
  ];
}

/** The next turn's messages: the conversation so far, the answer received, a new user message (a tool result in spirit). */
export function nextMessages(previous: readonly Message[], answer: string, turn: number): Message[] {
  return [...previous, { role: 'assistant', content: answer }, { role: 'user', content: `Tool output for step ${turn}: 42. Go on from there.` }];
}

export function chatBody(messages: readonly Message[], stream: boolean): string {
  return JSON.stringify({
    model: 'fake-model',
    messages,
    max_tokens: 16,
    temperature: 1,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });
}

/**
 * The assistant's text from a whole response body, streamed (SSE chunks, `[DONE]` last) or not; throws
 * when the body is not a complete answer (a stream cut before `[DONE]`, an error object).
 */
export function answerOf(body: string, stream: boolean): string {
  if (!stream) {
    const parsed = JSON.parse(body) as { choices?: Array<{ message?: { content?: unknown } }> };
    const content = parsed.choices?.[0]?.message?.content;
    if (typeof content !== 'string') throw new Error(`no answer in ${body.slice(0, 200)}`);
    return content;
  }
  let text = '';
  let done = false;
  for (const line of body.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '[DONE]') {
      done = true;
      continue;
    }
    const chunk = JSON.parse(data) as { choices?: Array<{ delta?: { content?: unknown } }>; error?: unknown };
    if (chunk.error !== undefined) throw new Error(`error in stream: ${data.slice(0, 200)}`);
    const piece = chunk.choices?.[0]?.delta?.content;
    if (typeof piece === 'string') text += piece;
  }
  if (!done) throw new Error('stream ended without [DONE]');
  return text;
}

/** Cheaper than answerOf where the text is not needed: the stream must still have ended with `[DONE]`. */
export function checkComplete(body: string, stream: boolean): void {
  if (stream ? !/^data:\s*\[DONE\]/m.test(body) : !body.includes('"choices"')) throw new Error(`incomplete answer: ${body.slice(0, 200)}`);
}
