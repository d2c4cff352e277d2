import { createServer, get, IncomingMessage, request, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { EngineTap } from './engine-tap';

/**
 * The tap's ground truth holds where a test needs it most: an engine far ahead of the test's process
 * (its whole answer already written in one piece) is cut or frozen after the fourth event, and the caller
 * receives exactly the events the tap recorded — no more.
 */
const EVENTS = 10;
const event = (i: number) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: `t${i}` }, logprobs: { content: [{ id: 100 + i, logprob: -1 }] } }] })}\r\n\r\n`;

describe('EngineTap', () => {
  let engine: Server;
  let engineUrl: string;
  let tap: EngineTap;

  beforeEach(async () => {
    // The whole answer in one write, and the connection left open: what a fast engine looks like to a slow reader.
    engine = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(Array.from({ length: EVENTS }, (_, i) => event(i)).join(''));
      if (req.url === '/complete') res.end('data: [DONE]\r\n\r\n');
    });
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve));
    engineUrl = `http://127.0.0.1:${(engine.address() as AddressInfo).port}`;
    tap = await EngineTap.start('engine-1', engineUrl);
  });

  afterEach(async () => {
    await tap.close();
    engine.closeAllConnections();
    await new Promise<void>((resolve) => engine.close(() => resolve()));
  });

  it('forwards a whole answer event by event and records every id', async () => {
    const got = await call(tap.url, '/complete', 1_000);
    expect(got).toEqual({ ids: Array.from({ length: EVENTS }, (_, i) => 100 + i), ended: 'end', done: true });
    expect(tap.requests.map((r) => ({ ids: r.ids.length, events: r.tokenEvents, ended: r.ended }))).toEqual([{ ids: EVENTS, events: EVENTS, ended: 'done' }]);
  });

  it('cut(): the caller gets exactly the events before the cut, then its connection breaks', async () => {
    tap.onTokens = (r) => {
      if (r.tokenEvents === 4) tap.cut();
    };
    const got = await call(tap.url, '/open', 1_000);
    expect(got).toEqual({ ids: [100, 101, 102, 103], ended: 'broken', done: false });
    expect(tap.requests[0]).toMatchObject({ ids: [100, 101, 102, 103], tokenEvents: 4, ended: 'broken' });
  });

  it('freeze(): the caller gets exactly the events before the freeze, then silence on an open connection', async () => {
    tap.onTokens = (r) => {
      if (r.tokenEvents === 4) tap.freeze();
    };
    const got = await call(tap.url, '/complete', 300);
    expect(got).toEqual({ ids: [100, 101, 102, 103], ended: 'still open', done: false });
    expect(tap.requests[0]).toMatchObject({ ids: [100, 101, 102, 103], tokenEvents: 4 });
  });

  it('a caller that hangs up first leaves its request abandoned', async () => {
    const req = request(`${tap.url}/open`, { method: 'POST', headers: { 'x-request-id': 'r-1' } });
    const res = await new Promise<IncomingMessage>((resolve) => {
      req.on('response', resolve);
      req.end('{}');
    });
    await new Promise((resolve) => res.once('data', resolve));
    res.destroy();
    await until(() => tap.requests[0]?.ended !== null);
    expect(tap.requests[0].ended).toBe('abandoned');
  });

  it('records nothing for a request without a request id, and still forwards it', async () => {
    const body = await new Promise<string>((resolve, reject) =>
      get(`${tap.url}/complete`, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve(text));
      }).on('error', reject),
    );
    expect(body).toContain('data: [DONE]');
    expect(tap.requests).toEqual([]);
  });
});

/** A streamed POST through the tap: the ids the caller received, and how its connection ended within `waitMs`. */
async function call(url: string, path: string, waitMs: number): Promise<{ ids: number[]; ended: 'end' | 'broken' | 'still open'; done: boolean }> {
  const req = request(`${url}${path}`, { method: 'POST', headers: { 'x-request-id': `r${path}`, 'content-type': 'application/json' } });
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    req.on('response', resolve).on('error', reject);
    req.end('{}');
  });
  let text = '';
  res.on('data', (d: Buffer) => (text += d.toString()));
  const ended = await new Promise<'end' | 'broken' | 'still open'>((resolve) => {
    const timer = setTimeout(() => resolve('still open'), waitMs);
    res.on('end', () => (clearTimeout(timer), resolve(res.complete ? 'end' : 'broken')));
    res.on('error', () => (clearTimeout(timer), resolve('broken')));
    res.on('aborted', () => (clearTimeout(timer), resolve('broken')));
  });
  req.destroy();
  const datas = text
    .split(/\r?\n\r?\n/)
    .map((e) => e.replace(/^data: /, ''))
    .filter((e) => e !== '');
  const ids = datas
    .filter((d) => d !== '[DONE]')
    .map((d) => (JSON.parse(d) as { choices: Array<{ logprobs: { content: Array<{ id: number }> } }> }).choices[0].logprobs.content[0].id);
  return { ids, ended, done: datas.includes('[DONE]') };
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
}
