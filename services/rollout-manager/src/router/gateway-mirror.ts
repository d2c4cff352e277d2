import { EngineView } from './engine-pool';
import { ModelGatewayClient } from './model-gateway-client';
import { RouterLogger } from './router-reporting';

/**
 * Keeps an external SGLang Model Gateway's workers equal to the engines robustrl routes to, so that
 * robustrl can drive an existing router instead of its own (docs/router.md): an engine that joins the pool (its
 * machine registered, serves current weights) is added; one that leaves (its machine was confirmed
 * faulty, lent to the trainer, fell behind) is removed. Only workers this mirror added are removed, so
 * the gateway's own workers are left alone. Syncs are serialised; one that fails is logged and the next
 * sync (every membership change, and a periodic resync) tries again, so a gateway that was down catches up.
 */
export class GatewayMirror {
  private readonly mirrored = new Set<string>();
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly gateway: ModelGatewayClient,
    private readonly log: RouterLogger,
  ) {}

  /** Bring the gateway to `engines` (resolves when this sync is done, failed or not). */
  sync(engines: readonly EngineView[]): Promise<void> {
    const wanted = new Map(engines.map((e) => [e.baseUrl, e]));
    this.chain = this.chain.then(() => this.apply(wanted));
    return this.chain;
  }

  private async apply(wanted: Map<string, EngineView>): Promise<void> {
    for (const [url, engine] of wanted) {
      if (this.mirrored.has(url)) continue;
      try {
        await this.gateway.addWorker({ url, runtime: engine.kind, machineId: engine.machineId });
        this.mirrored.add(url);
        this.log.info('worker added to the external gateway', { url, machineId: engine.machineId });
      } catch (err) {
        this.log.warn('the external gateway did not take a worker; retried on the next sync', { url, error: String(err) });
      }
    }
    for (const url of [...this.mirrored]) {
      if (wanted.has(url)) continue;
      try {
        await this.gateway.removeWorker(url);
        this.mirrored.delete(url);
        this.log.info('worker removed from the external gateway', { url });
      } catch (err) {
        this.log.warn('the external gateway did not remove a worker; retried on the next sync', { url, error: String(err) });
      }
    }
  }
}
