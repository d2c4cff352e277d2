import { EventLog1763700000000 } from './0001-event-log';

/** In order. Each is a TypeORM migration, run by TypeORM on PostgreSQL and on PGlite alike. */
export const STORE_MIGRATIONS = [EventLog1763700000000];
