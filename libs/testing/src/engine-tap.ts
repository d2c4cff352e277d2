import { createServer, IncomingMessage, request, Server, ServerResponse } from 'node:http';
import { AddressInfo, Socket } from 'node:net';

/**
 * A transparent HTTP proxy in front of one inference engine that writes down what the engine sent: the
 * ground truth a test compares the router's records with (issue 17: "the stored token ids equal the
 * concatenation of what the engines sampled"). Bytes pass through unchanged and unbuffered; in a
 * streamed answer every complete SSE event is parsed and the sampled token ids it carries
 * (`logprobs.content[].id`, as llama.cpp and OpenAI chat log-probs give them) are appended to the
 * request's record, keyed by the request's `x-request-id`. What the tap recorded is exactly what it
 * forwarded: an event the engine died in the middle of is neither forwarded whole nor recorded. When
 * the engine's connection breaks, the caller's is destroyed too, as a dead engine's would be.
 */
export interface TappedRequest {
  /** Arrival order across every tap of the process. */
  sequence: number;
  requestId: string;
  path: string;
  /** Ids in the complete events forwarded, in order. */
  ids: number[];
  /** Complete events that carried at least one token id. */
  tokenEvents: number;
  ended: 'done' | 'broken' | null;
}

export class EngineTap {
  private static sequence = 0;
  readonly requests: TappedRequest[] = [];
  /** Called after each forwarded event that carried token ids (a test kills the engine from here, mid-stream). */
  onTokens: ((request: TappedRequest) => void) | null = null;
  private readonly sockets = new Set<Socket>();
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

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const requestId = String(req.headers['x-request-id'] ?? '');
    const record: TappedRequest = { sequence: (EngineTap.sequence += 1), requestId, path: req.url ?? '/', ids: [], tokenEvents: 0, ended: null };
    if (req.method === 'POST' && requestId !== '') this.requests.push(record);
    const upstreamReq = request(`${this.upstream}${req.url}`, { method: req.method, headers: req.headers }, (upstreamRes) => {
      res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
      let buffer = '';
      upstreamRes.on('data', (piece: Buffer) => {
        res.write(piece);
        if (!String(upstreamRes.headers['content-type'] ?? '').includes('text/event-stream')) return;
        buffer += piece.toString('utf8').replace(/\r\n/g, '\n');
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          this.recordEvent(record, event);
        }
      });
      upstreamRes.on('end', () => {
        record.ended ??= upstreamRes.complete ? 'done' : 'broken';
        if (record.ended === 'done') res.end();
        else res.destroy();
      });
      upstreamRes.on('error', () => {
        record.ended = 'broken';
        res.destroy();
      });
      upstreamRes.on('aborted', () => {
        record.ended = 'broken';
        res.destroy();
      });
    });
    upstreamReq.on('error', () => {
      record.ended = 'broken';
      res.destroy();
    });
    // The router gave up on the engine (an idle timeout): the engine's request goes with it.
    res.on('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    req.pipe(upstreamReq);
  }

  private recordEvent(record: TappedRequest, event: string): void {
    const data = event
      .split('\n')
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
