/** The table the durable bare relay (bare-relay.ts) commits a row to per record; the bench counts it. */
export const DURABLE_RELAY_TABLE = 'bench_durable_relay';
