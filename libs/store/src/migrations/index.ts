import { EventLog1763700000000 } from './0001-event-log';
import { InboxOutbox1763800000000 } from './0002-inbox-outbox';
import { TrajectoryStore1763900000000 } from './0003-trajectory-store';

/** In order. Each is a TypeORM migration, run by TypeORM on PostgreSQL and on PGlite alike. */
export const STORE_MIGRATIONS = [EventLog1763700000000, InboxOutbox1763800000000, TrajectoryStore1763900000000];
