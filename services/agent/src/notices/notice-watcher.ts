import { CloudNotice, NoticeSource, noticeDetail, noticeHeaders, readNotice } from './cloud-notices';

export interface NoticeWatcherOptions {
  /** How often each source is read (AWS asks for every 5 s). */
  pollMs: number;
  /** Azure: this VM's name in its scheduled events' `Resources`. */
  vmName?: string;
  /** Reports one notice (the agent's `node-draining` signal); a report that fails is made again at the next poll. */
  report: (detail: string, notice: CloudNotice) => Promise<void>;
  logger: { log(line: string): void; warn(line: string): void };
  now?: () => Date;
  requestTimeoutMs?: number;
}

/**
 * Reads the machine's cloud notices (cloud-notices.ts) every `pollMs` and reports each notice once, as
 * soon as it appears: the controller starts the machine's recovery while its roles still run, instead
 * of after they went silent. A source that cannot be read is logged once per reason and read again at
 * the next poll; the agent goes on either way.
 */
export class NoticeWatcher {
  private timer: NodeJS.Timeout | null = null;
  private readonly reported = new Set<string>();
  private readonly failing = new Map<string, string>();
  /** EC2's IMDSv2 session token, per metadata origin (null: the endpoint takes requests without one). */
  private readonly awsTokens = new Map<string, string | null>();
  private polling: Promise<void> | null = null;

  constructor(
    private readonly sources: readonly NoticeSource[],
    private readonly o: NoticeWatcherOptions,
  ) {}

  start(): void {
    if (this.sources.length === 0 || this.timer) return;
    this.o.logger.log(`watching for cloud notices: ${this.sources.map((s) => `${s.format} at ${s.url}`).join(', ')} (every ${this.o.pollMs / 1000} s)`);
    const tick = () => {
      this.polling ??= this.poll().finally(() => (this.polling = null));
    };
    tick();
    this.timer = setInterval(tick, this.o.pollMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.polling;
  }

  /** Reads every source once; reports what is new. */
  async poll(): Promise<void> {
    await Promise.all(this.sources.map((source) => this.pollOne(source)));
  }

  private async pollOne(source: NoticeSource): Promise<void> {
    const now = this.o.now?.() ?? new Date();
    let notice: CloudNotice | null;
    try {
      notice = readNotice(source.format, await this.read(source), now, this.o.vmName);
      if (this.failing.delete(source.url)) this.o.logger.log(`cloud notices: ${source.format} at ${source.url} readable again`);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      if (this.failing.get(source.url) !== reason)
        this.o.logger.warn(`cloud notices: cannot read ${source.format} at ${source.url}: ${reason}; reading it again`);
      this.failing.set(source.url, reason);
      return;
    }
    if (notice === null || this.reported.has(notice.key)) return;
    const detail = noticeDetail(notice, now);
    try {
      await this.o.report(detail, notice);
      this.reported.add(notice.key);
      this.o.logger.warn(`cloud notice reported as node-draining: ${detail}`);
    } catch (err) {
      this.o.logger.warn(`cloud notice not reported yet (${err instanceof Error ? err.message : String(err)}): ${detail}`);
    }
  }

  private async read(source: NoticeSource): Promise<{ status: number; body: string }> {
    const headers = noticeHeaders(source.format);
    if (source.format === 'aws-spot') {
      const token = await this.awsToken(source.url);
      if (token) headers['X-aws-ec2-metadata-token'] = token;
    }
    const res = await fetch(source.url, { headers, signal: AbortSignal.timeout(this.o.requestTimeoutMs ?? 2_000) });
    // An expired session token: a new one next time.
    if (source.format === 'aws-spot' && res.status === 401) this.awsTokens.delete(new URL(source.url).origin);
    return { status: res.status, body: await res.text() };
  }

  /** IMDSv2: a session token from PUT /latest/api/token; where that is refused, requests go without one (IMDSv1). */
  private async awsToken(url: string): Promise<string | null> {
    const origin = new URL(url).origin;
    if (this.awsTokens.has(origin)) return this.awsTokens.get(origin)!;
    let token: string | null = null;
    try {
      const res = await fetch(`${origin}/latest/api/token`, {
        method: 'PUT',
        headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '21600' },
        signal: AbortSignal.timeout(this.o.requestTimeoutMs ?? 2_000),
      });
      if (res.ok) token = (await res.text()).trim() || null;
    } catch {
      token = null;
    }
    this.awsTokens.set(origin, token);
    return token;
  }
}
