import { createHash } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo, Socket } from 'node:net';
import { decodeIds, promptIdsOf, tokenIdOf } from './fake-token-ids';

/**
 * A rollout engine stand-in speaking enough of the OpenAI API (as served by vLLM) for the router's
 * tests: chat completions and completions, streaming and not, GET /health and /v1/models.
 *
 * Its output is DETERMINISTIC: a pure function of the conversation, so a run that failed over
 * mid-stream can be compared with an undisturbed one token for token. Like a greedy model, it
 * continues a partial answer the way it would have written it: with `continue_final_message` (chat)
 * or a prompt ending in a prefix of its own answer (completions) it emits only the remaining tokens.
 *
 * Every token is a space and five base-36 characters, so "the prompt ends with k of my tokens" is
 * checkable by length alone.
 */
export interface FakeEngineOptions {
  id?: string;
  model?: string;
  /** Content tokens of a reply (a tool-call reply has half as many, then the call). */
  tokensPerReply?: number;
  /** Delay between streamed tokens: a test kills the engine while it is streaming. */
  tokenIntervalMs?: number;
  /** Tool calls per conversation: the engine calls a tool while it has seen fewer tool results than this. */
  toolRounds?: number;
  /** Answer generation requests with this HTTP status instead (a 5xx to test failover). */
  failStatus?: number;
  weightVersion?: number;
  /**
   * `random`: each chat answer differs, as a sampling model's does (no continuation of partial answers).
   * A test then tells an answer replayed from the store from one generated again.
   */
  sampling?: 'greedy' | 'random';
  /**
   * Answer `return_token_ids` as vLLM ≥ 0.10.2 does (`token_ids` per choice, `prompt_token_ids` once), and
   * continue a token-id prompt made of a prompt's ids and sampled ones (`tokenIdOf`). Off: as an older
   * vLLM, which ignores the field.
   */
  tokenIds?: boolean;
  /**
   * Answer log-probs where a streamed request asks for them (chat `logprobs: true`, completions a number),
   * in vLLM's shapes, each token's value `logprobOf(token)`. Off: `logprobs` is always null.
   */
  logprobs?: boolean;
}

/** The log-prob the fake engine reports for a token (with `logprobs`): deterministic, so a test knows what is recorded. */
export function logprobOf(token: string): number {
  return -((tokenIdOf(token) % 97) + 1) / 64;
}

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
  [k: string]: unknown;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

const TOKEN_LENGTH = 6;

/** N deterministic tokens from a seed: ' ' + 5 base-36 characters each. */
export function deterministicTokens(seed: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const h = createHash('sha256').update(`${seed}#${i}`).digest();
    out.push(' ' + (h.readUInt32BE(0) % 36 ** 5).toString(36).padStart(5, '0'));
  }
  return out;
}

/** What the engine answers to a conversation: content tokens, then maybe one tool call. */
export interface ChatReply {
  tokens: string[];
  toolCall: ToolCall | null;
}

export function chatReplyFor(messages: readonly ChatMessage[], options: { tokensPerReply?: number; toolRounds?: number } = {}): ChatReply {
  const n = options.tokensPerReply ?? 12;
  const seed = conversationSeed(messages);
  const toolResults = messages.filter((m) => m.role === 'tool').length;
  const last = messages[messages.length - 1];
  const callsTool = (options.toolRounds ?? 0) > toolResults && (last?.role === 'user' || last?.role === 'tool');
  if (!callsTool) return { tokens: deterministicTokens(seed, n), toolCall: null };
  const id = createHash('sha256').update(`call:${seed}`).digest('hex');
  return {
    tokens: deterministicTokens(seed, Math.floor(n / 2)),
    toolCall: {
      id: `call_${id.slice(0, 12)}`,
      type: 'function',
      function: { name: 'lookup', arguments: JSON.stringify({ query: id.slice(12, 28), round: toolResults }) },
    },
  };
}

export function completionReplyFor(prompt: string, tokensPerReply = 12): string[] {
  return deterministicTokens(`prompt:${prompt}`, tokensPerReply);
}

/** The deterministic tool: what an agent loop in a test answers to a tool call. */
export function toolResultFor(call: ToolCall): string {
  return `result of ${call.function.name}(${call.function.arguments})`;
}

function conversationSeed(messages: readonly ChatMessage[]): string {
  return JSON.stringify(
    messages.map((m) => [m.role, m.content ?? null, (m.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]), m.tool_call_id ?? null]),
  );
}

/** k such that `text` is the first k tokens (joined) of `tokens`, or -1. */
function tokensMatched(tokens: readonly string[], text: string): number {
  if (text.length % TOKEN_LENGTH !== 0) return -1;
  const k = text.length / TOKEN_LENGTH;
  return k <= tokens.length && tokens.slice(0, k).join('') === text ? k : -1;
}

interface Plan {
  /** Content tokens still to emit. */
  tokens: string[];
  toolCall: ToolCall | null;
  finishReason: 'stop' | 'length' | 'tool_calls';
  promptTokens: number;
  /** The prompt's ids (`tokenIds`): its text's, as `promptIdsOf` numbers them. */
  promptIds: number[];
}

export class FakeInferenceEngine {
  readonly id: string;
  readonly model: string;
  /** Every generation request's path and body, in arrival order. */
  readonly requests: Array<{ path: string; body: Record<string, unknown> }> = [];
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;
  private port = 0;
  private killed = false;
  private frozen = false;
  private held = 0;
  private sequence = 0;
  private open = 0;

  private constructor(private readonly options: FakeEngineOptions) {
    this.id = options.id ?? 'fake-engine';
    this.model = options.model ?? 'fake-model';
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(options: FakeEngineOptions = {}, port = 0): Promise<FakeInferenceEngine> {
    const engine = new FakeInferenceEngine(options);
    await engine.listen(port);
    return engine;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get generationRequests(): number {
    return this.requests.length;
  }

  /** Generation requests being answered right now (a kill now cuts a stream mid-way). */
  get openGenerations(): number {
    return this.open;
  }

  /** The machine died: every open connection is cut now, mid-stream included; new connections are refused. */
  kill(): void {
    this.killed = true;
    this.server.close();
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  /**
   * The machine hangs (a wedged driver, a partitioned network): connections are accepted but nothing is
   * ever answered — the failure a liveness probe with a timeout catches and a plain request does not.
   */
  freeze(): void {
    this.frozen = true;
  }

  /**
   * The next `n` generation requests wait in the engine's queue and are never answered, while the
   * engine goes on serving the others: a request behind busy slots that outlasts its caller's patience.
   */
  holdNext(n: number): void {
    this.held += n;
  }

  /** Graceful: stop accepting, let open responses finish. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeIdleConnections();
    });
  }

  /** Bring a killed engine back on the same port (a replaced machine at the same address). */
  async restart(): Promise<void> {
    this.killed = false;
    await this.listen(this.port);
  }

  private listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        this.port = (this.server.address() as AddressInfo).port;
        resolve();
      });
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.frozen) return;
    try {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method === 'GET' && path === '/health') return void res.writeHead(200).end();
      if (req.method === 'GET' && path === '/v1/models') {
        return json(res, 200, { object: 'list', data: [{ id: this.model, object: 'model', created: 0, owned_by: this.id }] });
      }
      if (req.method !== 'POST' || (path !== '/v1/chat/completions' && path !== '/v1/completions')) {
        return json(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'NotFoundError', code: 404 } });
      }
      const body = JSON.parse(await readBody(req)) as Record<string, unknown>;
      this.requests.push({ path, body });
      if (this.held > 0) {
        this.held -= 1;
        return;
      }
      if (this.options.failStatus) {
        return json(res, this.options.failStatus, { error: { message: `${this.id} is failing`, type: 'InternalServerError', code: this.options.failStatus } });
      }
      this.open += 1;
      try {
        if (path === '/v1/chat/completions') await this.chat(body, res);
        else await this.completion(body, res);
      } finally {
        this.open -= 1;
      }
    } catch (err) {
      if (!res.headersSent) json(res, 400, { error: { message: String(err), type: 'BadRequestError', code: 400 } });
    }
  }

  private chatPlan(body: Record<string, unknown>): Plan {
    const messages = (body.messages as ChatMessage[]) ?? [];
    const continuing = body.continue_final_message === true && messages[messages.length - 1]?.role === 'assistant';
    const conversation = continuing ? messages.slice(0, -1) : messages;
    const sampled = this.options.sampling === 'random' ? [{ role: 'system', content: `sample ${Math.random()}` }, ...conversation] : conversation;
    const reply = chatReplyFor(sampled, this.options);
    let tokens = reply.tokens;
    if (continuing) {
      const partial = messages[messages.length - 1].content;
      const k = typeof partial === 'string' ? tokensMatched(reply.tokens, partial) : -1;
      if (k >= 0) tokens = tokens.slice(k);
    }
    return this.limit(tokens, reply.toolCall, maxTokensOf(body), JSON.stringify(messages).length, JSON.stringify(conversation));
  }

  private completionPlan(body: Record<string, unknown>): Plan {
    const ids = Array.isArray(body.prompt) && body.prompt.every((t) => Number.isInteger(t)) ? (body.prompt as number[]) : null;
    const decoded = this.options.tokenIds && ids ? decodeIds(ids) : null;
    if (decoded) return this.continuedFromIds(decoded.text, decoded.tokens, body);
    // A token-id prompt (as vLLM takes, and the router's generate probe sends) stands for its ids' text.
    const prompt = Array.isArray(body.prompt) && body.prompt.every((t) => Number.isInteger(t)) ? `ids:${body.prompt.join(',')}` : body.prompt;
    if (typeof prompt !== 'string') throw new Error('the fake engine takes a string or token-id prompt');
    const n = this.options.tokensPerReply ?? 12;
    // The prompt may end with the first k tokens of the answer to the prompt without them: continue after them.
    for (let k = Math.min(n, Math.floor(prompt.length / TOKEN_LENGTH)); k > 0; k--) {
      const base = prompt.slice(0, prompt.length - k * TOKEN_LENGTH);
      const full = completionReplyFor(base, n);
      if (full.slice(0, k).join('') === prompt.slice(base.length)) return this.limit(full.slice(k), null, maxTokensOf(body), prompt.length, prompt);
    }
    return this.limit(completionReplyFor(prompt, n), null, maxTokensOf(body), prompt.length, prompt);
  }

  /**
   * A continuation from exact ids: the reply to the prompt's text (a chat's messages, or a completion's
   * prompt) after the tokens already sampled, as greedy decoding would go on. A reply's tool call is not
   * continued this way (the router continues a chat with tools from its text).
   */
  private continuedFromIds(text: string, sampled: string[], body: Record<string, unknown>): Plan {
    let messages: ChatMessage[] | null = null;
    try {
      const parsed: unknown = JSON.parse(text);
      if (Array.isArray(parsed)) messages = parsed as ChatMessage[];
    } catch {
      messages = null;
    }
    const reply = messages ? chatReplyFor(messages, this.options).tokens : completionReplyFor(text, this.options.tokensPerReply ?? 12);
    const k = sampled.length <= reply.length && sampled.every((t, i) => t === reply[i]) ? sampled.length : 0;
    return this.limit(reply.slice(k), null, maxTokensOf(body), text.length + sampled.length * 4, text);
  }

  private limit(tokens: string[], toolCall: ToolCall | null, maxTokens: number | undefined, promptChars: number, promptText: string): Plan {
    const promptTokens = Math.ceil(promptChars / 4);
    const promptIds = this.options.tokenIds ? promptIdsOf(promptText) : [];
    if (maxTokens !== undefined && maxTokens < tokens.length)
      return { tokens: tokens.slice(0, maxTokens), toolCall: null, finishReason: 'length', promptTokens, promptIds };
    return { tokens, toolCall, finishReason: toolCall ? 'tool_calls' : 'stop', promptTokens, promptIds };
  }

  /** Whether this request's answer carries ids (vLLM's return_token_ids). */
  private idsAsked(body: Record<string, unknown>): boolean {
    return this.options.tokenIds === true && body.return_token_ids === true;
  }

  private async chat(body: Record<string, unknown>, res: ServerResponse): Promise<void> {
    const plan = this.chatPlan(body);
    const id = `chatcmpl-${this.id}-${++this.sequence}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: plan.promptTokens, completion_tokens: plan.tokens.length + (plan.toolCall ? 1 : 0), total_tokens: 0 };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    if (body.stream !== true) {
      const content = plan.tokens.join('');
      const message: ChatMessage = { role: 'assistant', content: content === '' && plan.toolCall ? null : content };
      if (plan.toolCall) message.tool_calls = [plan.toolCall];
      return json(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model: this.model,
        choices: [{ index: 0, message, logprobs: null, finish_reason: plan.finishReason }],
        usage,
      });
    }
    const ids = this.idsAsked(body);
    const logprobs = this.options.logprobs === true && body.logprobs === true;
    const chunk = (delta: Record<string, unknown>, finish: string | null = null, tokenIds?: number[]) => {
      const token = typeof delta.content === 'string' && delta.content !== '' ? delta.content : null;
      const lp = logprobs && token ? { content: [{ token, logprob: logprobOf(token), bytes: [...Buffer.from(token)], top_logprobs: [] }] } : null;
      return {
        id,
        object: 'chat.completion.chunk',
        created,
        model: this.model,
        choices: [{ index: 0, delta, logprobs: lp, finish_reason: finish, ...(ids && tokenIds ? { token_ids: tokenIds } : {}) }],
      };
    };
    startSse(res);
    const alive = () => !this.killed && !res.destroyed;
    // vLLM's first chunk: the role, and the prompt's ids at the top level when asked.
    sse(res, { ...chunk({ role: 'assistant', content: '' }), ...(ids ? { prompt_token_ids: plan.promptIds } : {}) });
    for (const token of plan.tokens) {
      await sleep(this.options.tokenIntervalMs ?? 5);
      if (!alive()) return;
      sse(res, chunk({ content: token }, null, [tokenIdOf(token)]));
    }
    if (plan.toolCall) {
      // The arguments arrive in pieces, as from a real tool parser: a kill can land inside the call.
      const args = plan.toolCall.function.arguments;
      const third = Math.ceil(args.length / 3);
      const pieces = [args.slice(0, third), args.slice(third, 2 * third), args.slice(2 * third)];
      await sleep(this.options.tokenIntervalMs ?? 5);
      if (!alive()) return;
      sse(res, chunk({ tool_calls: [{ index: 0, id: plan.toolCall.id, type: 'function', function: { name: plan.toolCall.function.name, arguments: '' } }] }));
      for (const piece of pieces) {
        await sleep(this.options.tokenIntervalMs ?? 5);
        if (!alive()) return;
        sse(res, chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }));
      }
    }
    await sleep(this.options.tokenIntervalMs ?? 5);
    if (!alive()) return;
    sse(res, chunk({}, plan.finishReason));
    if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage) {
      sse(res, { id, object: 'chat.completion.chunk', created, model: this.model, choices: [], usage });
    }
    res.end('data: [DONE]\n\n');
  }

  private async completion(body: Record<string, unknown>, res: ServerResponse): Promise<void> {
    const plan = this.completionPlan(body);
    const id = `cmpl-${this.id}-${++this.sequence}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: plan.promptTokens, completion_tokens: plan.tokens.length, total_tokens: plan.promptTokens + plan.tokens.length };
    if (body.stream !== true) {
      return json(res, 200, {
        id,
        object: 'text_completion',
        created,
        model: this.model,
        choices: [{ index: 0, text: plan.tokens.join(''), logprobs: null, finish_reason: plan.finishReason }],
        usage,
      });
    }
    const ids = this.idsAsked(body);
    const logprobs = this.options.logprobs === true && typeof body.logprobs === 'number';
    let first = true;
    const chunk = (text: string, finish: string | null = null) => {
      // vLLM's completions chunks carry both lists in the choice, the prompt's on the first one only.
      const tokenIds = ids ? { token_ids: text === '' ? [] : [tokenIdOf(text)], ...(first ? { prompt_token_ids: plan.promptIds } : {}) } : {};
      first = false;
      const lp =
        logprobs && text !== '' ? { text_offset: [0], token_logprobs: [logprobOf(text)], tokens: [text], top_logprobs: [{ [text]: logprobOf(text) }] } : null;
      return { id, object: 'text_completion', created, model: this.model, choices: [{ index: 0, text, logprobs: lp, finish_reason: finish, ...tokenIds }] };
    };
    startSse(res);
    for (const token of plan.tokens) {
      await sleep(this.options.tokenIntervalMs ?? 5);
      if (this.killed || res.destroyed) return;
      sse(res, chunk(token));
    }
    await sleep(this.options.tokenIntervalMs ?? 5);
    if (this.killed || res.destroyed) return;
    sse(res, chunk('', plan.finishReason));
    if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage) {
      sse(res, { id, object: 'text_completion', created, model: this.model, choices: [], usage });
    }
    res.end('data: [DONE]\n\n');
  }
}

function maxTokensOf(body: Record<string, unknown>): number | undefined {
  const v = body.max_completion_tokens ?? body.max_tokens;
  return typeof v === 'number' ? v : undefined;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

function startSse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
}

function sse(res: ServerResponse, data: unknown): void {
  res.write(`data: ${JSON.stringify(data)}\n\n`);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
