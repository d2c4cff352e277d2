import { ConfigError } from '@robustrl/config';
import { storeConfigFromEnv } from './data-source';

describe('the store from the environment', () => {
  it('PostgreSQL with DATABASE_URL, else PGlite (in memory, or in ROBUSTRL_PGLITE_DIR)', () => {
    expect(storeConfigFromEnv({ DATABASE_URL: 'postgresql://robustrl:pw@db:5432/robustrl' })).toEqual({
      kind: 'postgres',
      url: 'postgresql://robustrl:pw@db:5432/robustrl',
    });
    expect(storeConfigFromEnv({})).toEqual({ kind: 'pglite', dataDir: undefined });
    expect(storeConfigFromEnv({ DATABASE_URL: '', ROBUSTRL_PGLITE_DIR: '/var/lib/robustrl' })).toEqual({ kind: 'pglite', dataDir: '/var/lib/robustrl' });
  });

  it('refuses another URL, naming the variable and never showing the password', () => {
    const read = () => storeConfigFromEnv({ DATABASE_URL: 'mysql://robustrl:s3cret@db/robustrl' });
    expect(read).toThrow(ConfigError);
    expect(read).toThrow("DATABASE_URL must be a postgres:// URL, got 'mysql://robustrl:***@db/robustrl'");
  });
});
