import { text } from '@robustrl/config';

/**
 * What every service reads for its store (docs/operators/configuration-reference.md), read by
 * storeConfigFromEnv; `DATABASE_URL`, the PostgreSQL server that replaces PGlite, is read by hand there.
 */
export const PGLITE_DIR = text('ROBUSTRL_PGLITE_DIR', {
  owner: 'services',
  meaning: 'without `DATABASE_URL`: persist the embedded PGlite database in this folder',
  default: undefined,
  defaultText: 'in memory',
});
