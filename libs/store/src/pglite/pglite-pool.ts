import { EventEmitter } from 'node:events';
import type { PGlite, Results } from '@electric-sql/pglite';

type Callback = (err: Error | null, result?: unknown) => void;

/**
 * A `pg`-shaped driver over one PGlite instance, so TypeORM's own postgres driver runs unchanged on
 * the embedded database and every query of the store is the same SQL on both.
 *
 * PGlite is a single connection. The pool therefore leases that one connection to one caller at a
 * time (a mutex held from `connect` until `release`): a TypeORM transaction owns the connection from
 * BEGIN to COMMIT, so statements of concurrent transactions can never interleave. The price: code
 * running inside a transaction must use that transaction's manager, never the data source itself.
 */
export function pgliteDriver(db: PGlite): { Pool: new () => EventEmitter } {
  let tail: Promise<void> = Promise.resolve();
  const acquire = (): Promise<() => void> => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const ready = tail.then(() => {
      let released = false;
      return () => {
        if (!released) {
          released = true;
          release();
        }
      };
    });
    tail = tail.then(() => held);
    return ready;
  };

  const run = async (sql: string, params?: unknown[]) => {
    const result: Results =
      params && params.length > 0 ? await db.query(sql, params) : ((await db.exec(sql)).at(-1) ?? { rows: [], fields: [], affectedRows: 0 });
    return {
      rows: result.rows,
      rowCount: result.affectedRows ?? result.rows.length,
      command: /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? '',
      fields: result.fields,
    };
  };

  class Connection extends EventEmitter {
    query(sql: string, params?: unknown[] | Callback, cb?: Callback) {
      const callback = typeof params === 'function' ? params : cb;
      const values = typeof params === 'function' ? undefined : params;
      const promise = run(sql, values);
      if (callback)
        promise.then(
          (r) => callback(null, r),
          (e: Error) => callback(e),
        );
      return promise;
    }
  }

  class Pool extends EventEmitter {
    private readonly connection = new Connection();
    connect(callback: (err: Error | null, connection?: Connection, release?: () => void) => void) {
      acquire().then(
        (release) => callback(null, this.connection, release),
        (err: Error) => callback(err),
      );
    }
    async query(sql: string, params?: unknown[]) {
      const release = await acquire();
      try {
        return await run(sql, params);
      } finally {
        release();
      }
    }
    /** The PGlite instance belongs to whoever created it; ending the pool does not close it. */
    end(callback?: (err: Error | null) => void) {
      callback?.(null);
    }
  }
  return { Pool };
}
