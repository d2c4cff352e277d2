import { createServer, IncomingMessage, request, Server, ServerResponse } from 'node:http';
import { AddressInfo, Socket } from 'node:net';
import { StringDecoder } from 'node:string_decoder';

/**
 * A transparent HTTP proxy in front of one inference engine that writes down what the engine sent: the
 * ground truth a test compares the router's records with ("the stored token ids equal the
 * concatenation of what the engines sampled"). A streamed answer is forwarded event by event, each
 * complete SSE event as the engine sent it, and the sampled token ids it carries
 * (`logprobs.content[].id`, as llama.cpp and OpenAI chat log-probs give them) are appended to the
 * request's record, keyed by the request's `x-request-id`. What the tap recorded is exactly what it
 * forwarded: an event the engine died in the middle of is neither forwarded nor recorded.
 *
 * The tap is also where a test makes an engine's failure land mid-stream on a loaded machine: killing
 * the process is not enough, because by the time the test's process sees the fourth token the engine
 * may have written its whole answer into the socket. `cut()` is the machine gone (nothing more reaches
 * the caller, whose connection breaks after what was forwarded); `freeze()` is the machine hung
 * (nothing more reaches the caller, whose connection stays open and silent).
 */
/** The end of an SSE event (a blank line), in either line-ending style. */
const EVENT_END = /\r?\n\r?\n/;

export interface TappedRequest {
  /** Arrival order across every tap of the process. */
  sequence: number;
  requestId: string;
  path: string;
  /** Ids in the complete events forwarded, in order. */
  ids: number[];
  /** Complete events that carried at least one token id. */
  tokenEvents: number;
  /**
   * How the request ended: the engine finished (`done`) or broke its stream (`broken`), or the caller
   * hung up first (`abandoned`: the router gave up on the engine, e.g. after its idle timeout). Ids of an
   * abandoned request may include events that were in flight when the caller hung up and that it never
   * read: what the caller received is a prefix of `ids`, not necessarily all of them.
   */
  ended: 'done' | 'broken' | 'abandoned' | null;
}

export class EngineTap {
  private static sequence = 0;
  readonly requests: TappedRequest[] = [];
  /** Called after each forwarded event that carried token ids (a test kills the engine from here, mid-stream). */
  onTokens: ((request: TappedRequest) => void) | null = null;
  private readonly sockets = new Set<Socket>();
  /** Answers being forwarded now: what `cut()` breaks. */
  private readonly open = new Set<{ record: TappedRequest; breakOff: () => void }>();
  private frozen = false;
  private constructor(
    readonly id: string,
    private readonly upstream: string,
    private readonly server: Server,
  ) {}

  static async start(id: string, upstream: string): Promise<EngineTap> {
    const server = createServer();
    const tap = new EngineTap(id, upstream.replace(/\/+$/, ''), server);
    server.on('request', (req, res) => tap.forward(req, res));
    server.on('connection', (s) => {
      tap.sockets.add(s);
      s.on('close', () => tap.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return tap;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Requests whose x-request-id starts with `prefix`, in arrival order. */
  requestsFor(prefix: string): TappedRequest[] {
    return this.requests.filter((r) => r.requestId.startsWith(prefix));
  }

  /**
   * The machine is gone, now: every answer being forwarded breaks after what was forwarded (the caller
   * sees its connection end mid-answer), and nothing the engine sent after reaches anyone.
   */
  cut(): void {
    for (const exchange of [...this.open]) exchange.breakOff();
  }

  /** The machine hangs, now: nothing more the engine sends reaches a caller; connections stay open. */
  freeze(): void {
    this.frozen = true;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const requestId = String(req.headers['x-request-id'] ?? '');
    const record: TappedRequest = { sequence: (EngineTap.sequence += 1), requestId, path: req.url ?? '/', ids: [], tokenEvents: 0, ended: null };
    if (req.method === 'POST' && requestId !== '') this.requests.push(record);
    let stopped = false;
    const exchange = {
      record,
      // Ending the socket (not destroying it) still delivers what was written in this tick, which Node
      // holds corked until the next; the caller then reads an answer that stops before its end.
      breakOff: () => {
        if (stopped) return;
        stopped = true;
        this.open.delete(exchange);
        record.ended ??= 'broken';
        upstreamReq.destroy();
        if (res.socket) res.socket.end();
        else res.destroy();
      },
    };
    const upstreamReq = request(`${this.upstream}${req.url}`, { method: req.method, headers: req.headers }, (upstreamRes) => {
      if (stopped || this.frozen) return;
      res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
      const streamed = String(upstreamRes.headers['content-type'] ?? '').includes('text/event-stream');
      const decoder = new StringDecoder('utf8');
      let buffer = '';
      upstreamRes.on('data', (piece: Buffer) => {
        if (stopped || this.frozen) return;
        if (!streamed) {
          res.write(piece);
          return;
        }
        buffer += decoder.write(piece);
        let end: RegExpExecArray | null;
        while ((end = EVENT_END.exec(buffer)) !== null) {
          const event = buffer.slice(0, end.index + end[0].length);
          buffer = buffer.slice(event.length);
          res.write(event);
          this.recordEvent(record, event);
          // The event just forwarded made the test cut or freeze the engine: nothing after it goes out.
          if (stopped || this.frozen) return;
        }
      });
      upstreamRes.on('end', () => {
        if (stopped || this.frozen) return;
        if (!upstreamRes.complete) return exchange.breakOff();
        stopped = true;
        this.open.delete(exchange);
        record.ended ??= 'done';
        res.end(buffer);
      });
      upstreamRes.on('error', () => exchange.breakOff());
      upstreamRes.on('aborted', () => exchange.breakOff());
    });
    upstreamReq.on('error', () => exchange.breakOff());
    this.open.add(exchange);
    // The router gave up on the engine (an idle timeout): the engine's request goes with it.
    res.on('close', () => {
      this.open.delete(exchange);
      if (res.writableFinished || stopped) return;
      stopped = true;
      record.ended ??= 'abandoned';
      upstreamReq.destroy();
    });
    req.pipe(upstreamReq);
  }

  private recordEvent(record: TappedRequest, event: string): void {
    const data = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trim())
      .join('\n');
    if (data === '' || data === '[DONE]') return;
    let chunk: { choices?: Array<{ index?: number; logprobs?: { content?: Array<{ id?: number }> } | null }> };
    try {
      chunk = JSON.parse(data) as typeof chunk;
    } catch {
      return;
    }
    const choice = (chunk.choices ?? []).find((c) => (c.index ?? 0) === 0);
    const ids = (choice?.logprobs?.content ?? []).map((e) => e.id).filter((id): id is number => typeof id === 'number');
    if (ids.length === 0) return;
    record.ids.push(...ids);
    record.tokenEvents += 1;
    this.onTokens?.(record);
  }
}
