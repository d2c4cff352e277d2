import { z } from 'zod';
import { busConfigFromEnv, BusConfig } from '@robustrl/bus';
import { StoreConfig, storeConfigFromEnv } from '@robustrl/store';

export interface ServiceConfig {
  serviceName: string;
  bus: BusConfig;
  store: StoreConfig;
  /** HTTP port of the health endpoint; 0 picks a free one, null disables HTTP. */
  httpPort: number | null;
  /** The clock deciders read (default: the wall clock). The main job runs its emulated cluster in scaled time. */
  clock?: () => number;
}

const Port = z.coerce.number().int().min(0).max(65535);

/** Read and validate a service's configuration; a bad value stops start-up with a message naming it. */
export function serviceConfigFromEnv(serviceName: string, defaultPort: number | null, env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  let httpPort: number | null = defaultPort;
  if (env.ROBUSTRL_HTTP_PORT !== undefined) {
    if (env.ROBUSTRL_HTTP_PORT === 'off') httpPort = null;
    else {
      const parsed = Port.safeParse(env.ROBUSTRL_HTTP_PORT);
      if (!parsed.success) throw new Error(`ROBUSTRL_HTTP_PORT must be a port number or 'off', got '${env.ROBUSTRL_HTTP_PORT}'`);
      httpPort = parsed.data;
    }
  }
  return { serviceName, bus: busConfigFromEnv(env, `robustrl-${serviceName}`), store: storeConfigFromEnv(env), httpPort };
}
