import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { NoticeWatcher } from './notice-watcher';

/** A stand-in metadata server: what EC2's answers, changed by the test as the cloud would. */
class StandInMetadata {
  instanceAction: { action: string; time: string } | null = null;
  failing = false;
  readonly seen: Array<{ method: string; path: string; token: string | undefined }> = [];
  private server!: Server;

  async start(): Promise<string> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      this.seen.push({ method: req.method ?? '', path: req.url ?? '', token: req.headers['x-aws-ec2-metadata-token'] as string | undefined });
      if (req.method === 'PUT' && req.url === '/latest/api/token') return void res.writeHead(200).end('session-token');
      if (req.headers['x-aws-ec2-metadata-token'] !== 'session-token') return void res.writeHead(401).end();
      if (this.failing) return void res.writeHead(503).end();
      if (this.instanceAction === null) return void res.writeHead(404).end('Not Found');
      res.writeHead(200, { 'content-type': 'text/plain' }).end(JSON.stringify(this.instanceAction));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('NoticeWatcher against a stand-in EC2 metadata server', () => {
  let metadata: StandInMetadata;
  let base: string;
  const lines: string[] = [];
  const logger = { log: (l: string) => lines.push(l), warn: (l: string) => lines.push(l) };

  beforeEach(async () => {
    metadata = new StandInMetadata();
    base = await metadata.start();
    lines.length = 0;
  });
  afterEach(() => metadata.stop());

  it('reports a spot interruption once, with its deadline, through IMDSv2; nothing before it', async () => {
    const reports: string[] = [];
    const watcher = new NoticeWatcher([{ format: 'aws-spot', url: `${base}/latest/meta-data/spot/instance-action` }], {
      pollMs: 60_000,
      report: async (detail) => void reports.push(detail),
      logger,
      now: () => new Date('2026-11-28T10:00:00Z'),
    });
    await watcher.poll();
    expect(reports).toEqual([]);
    metadata.instanceAction = { action: 'terminate', time: '2026-11-28T10:02:00Z' };
    await watcher.poll();
    await watcher.poll();
    expect(reports).toEqual(["EC2 spot instance action 'terminate': this machine goes by 2026-11-28T10:02:00.000Z (in 120 s)"]);
    // One session token, sent with every read.
    expect(metadata.seen.filter((r) => r.method === 'PUT')).toHaveLength(1);
    expect(metadata.seen.filter((r) => r.method === 'GET').every((r) => r.token === 'session-token')).toBe(true);
  });

  it('a source that fails is logged once and read again; a report that fails is made again at the next poll', async () => {
    const reports: string[] = [];
    let refuse = true;
    const watcher = new NoticeWatcher([{ format: 'aws-spot', url: `${base}/latest/meta-data/spot/instance-action` }], {
      pollMs: 60_000,
      report: async (detail) => {
        if (refuse) throw new Error('the broker is away');
        reports.push(detail);
      },
      logger,
    });
    metadata.failing = true;
    await watcher.poll();
    await watcher.poll();
    expect(lines.filter((l) => l.includes('cannot read aws-spot'))).toHaveLength(1);
    expect(lines.find((l) => l.includes('cannot read'))).toContain('answered 503');
    metadata.failing = false;
    metadata.instanceAction = { action: 'stop', time: '2026-11-28T10:02:00Z' };
    await watcher.poll();
    expect(reports).toEqual([]);
    expect(lines.some((l) => l.includes('not reported yet (the broker is away)'))).toBe(true);
    refuse = false;
    await watcher.poll();
    expect(reports).toHaveLength(1);
    expect(reports[0]).toContain("EC2 spot instance action 'stop'");
  });

  it('an unreachable endpoint does not stop the agent: the poll resolves and says why', async () => {
    await metadata.stop();
    const watcher = new NoticeWatcher([{ format: 'gce-preempted', url: `${base}/computeMetadata/v1/instance/preempted` }], {
      pollMs: 60_000,
      report: async () => undefined,
      logger,
      requestTimeoutMs: 500,
    });
    await expect(watcher.poll()).resolves.toBeUndefined();
    expect(lines.some((l) => l.includes('cannot read gce-preempted'))).toBe(true);
    metadata = new StandInMetadata();
    base = await metadata.start();
  });
});
