import { ConfigError, custom, text } from '@robustrl/config';

/**
 * What every service reads for its store (docs/operators/configuration-reference.md), read by
 * storeConfigFromEnv: the PostgreSQL server, or else the embedded PGlite database's folder.
 */
const owner = 'services';

export const DATABASE_URL = custom('DATABASE_URL', {
  owner,
  meaning: "the store's PostgreSQL server; unset, PGlite in the process (embedded mode)",
  default: undefined,
  defaultText: 'none: PGlite in the process',
  accepted: 'a postgres:// URL',
  // Its error shows the value with the password masked: the URL carries the login.
  parse: (raw) => {
    if (!/^postgres(ql)?:\/\//.test(raw)) throw new ConfigError('DATABASE_URL', 'a postgres:// URL', raw.replace(/:[^:@/]*@/, ':***@'));
    return raw;
  },
});
export const PGLITE_DIR = text('ROBUSTRL_PGLITE_DIR', {
  owner,
  meaning: 'without `DATABASE_URL`: persist the embedded PGlite database in this folder',
  default: undefined,
  defaultText: 'in memory',
});
