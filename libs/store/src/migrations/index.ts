import { MigrationInterface } from 'typeorm';
import { EventLog1763700000000 } from './0001-event-log';
import { InboxOutbox1763800000000 } from './0002-inbox-outbox';
import { InboxByJob1764000000000 } from './0004-inbox-by-job';
import { DeadLetterClaims1764100000000 } from './0005-dead-letter-claims';
import { Snapshots1764200000000 } from './0006-snapshots';
import { DeadLetterWritten1764300000000 } from './0007-dead-letter-written';

/** A TypeORM migration class: its name ends in a JavaScript timestamp, which orders it among all others. */
export type StoreMigration = new () => MigrationInterface;

/**
 * The store's own tables (event log, checkpoints, inbox, outbox), in order. Each is a TypeORM
 * migration, run by TypeORM on PostgreSQL and on PGlite alike. A service's own tables are created by
 * migrations the service owns and hands to the store (`EventStore.open(config, { migrations })` or
 * `store.migrate(...)`); they share the migrations table, so each runs once per database.
 */
export const STORE_MIGRATIONS: readonly StoreMigration[] = [
  EventLog1763700000000,
  InboxOutbox1763800000000,
  InboxByJob1764000000000,
  DeadLetterClaims1764100000000,
  Snapshots1764200000000,
  DeadLetterWritten1764300000000,
];
