import { DeadLetterClaims } from './dead-letter-claims';
import { DataSource, EntityManager } from 'typeorm';
import { MessageOf, MessageType, RobustrlMessage } from '@robustrl/contracts';
import { ApplyOutcome, ConsumerCheckpoints } from './checkpoints';
import { openDataSource, runServiceMigrations, StoreConfig } from './data-source';
import { EventLog, LoggedMessage } from './event-log';
import { Inbox } from './inbox';
import { StoreMigration } from './migrations';
import { Outbox } from './outbox';
import { Snapshots } from './snapshots';

/** Where a delivered record sits: enough to checkpoint it (a bus Delivery satisfies this). */
export interface StreamPosition {
  topic: string;
  partition: number;
  offset: string;
}

/**
 * The store a service shell uses: the event log, consumer checkpoints, and transactions that bind
 * them to the service's own tables (projections, read models).
 */
export class EventStore {
  readonly log = new EventLog();
  readonly checkpoints = new ConsumerCheckpoints();
  readonly inbox = new Inbox();
  readonly outbox = new Outbox();
  readonly snapshots = new Snapshots();
  /** The bus's dead-letter ledger over this store: each bad record dead-lettered once across groups. */
  readonly deadLetterClaims: DeadLetterClaims;

  private constructor(
    readonly dataSource: DataSource,
    readonly backend: StoreConfig['kind'],
    private readonly closeFn: () => Promise<void>,
  ) {
    this.deadLetterClaims = new DeadLetterClaims(dataSource);
  }

  /**
   * Open the store and bring its tables up to date; `migrations` are the opener's own tables (a
   * service's), run with the store's in one ordered pass.
   */
  static async open(config: StoreConfig, options: { migrations?: readonly StoreMigration[] } = {}): Promise<EventStore> {
    const opened = await openDataSource(config, options.migrations);
    return new EventStore(opened.dataSource, config.kind, opened.close);
  }

  /**
   * Run a service's own migrations on this open store (for a service that shares a store opened by
   * someone else, e.g. the core module of a Nest process). Each runs once per database: they share the
   * store's migrations table, and on PostgreSQL its lock against services migrating at the same time.
   */
  migrate(migrations: readonly StoreMigration[]): Promise<void> {
    return runServiceMigrations(this.dataSource, this.backend, migrations);
  }

  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(work);
  }

  /**
   * Run `effect` exactly once per (consumer, position): checkpoint compare-and-set and effect in one
   * transaction. The idempotent-consumer building block; throw inside `effect` to roll both back.
   */
  applyOnce(consumer: string, at: StreamPosition, effect: (manager: EntityManager) => Promise<void>): Promise<ApplyOutcome> {
    return this.transaction(async (manager) => {
      const stream = `${at.topic}/${at.partition}`;
      if (!(await this.checkpoints.advance(manager, consumer, stream, at.offset))) return 'duplicate';
      await effect(manager);
      return 'applied';
    });
  }

  /** Record a delivered message in the event log, once, with the consumer's checkpoint. */
  record(consumer: string, at: StreamPosition, message: RobustrlMessage): Promise<ApplyOutcome> {
    return this.applyOnce(consumer, at, async (manager) => {
      await this.log.append(manager, [message]);
    });
  }

  append(messages: readonly RobustrlMessage[]): Promise<Array<string | null>> {
    return this.transaction((manager) => this.log.append(manager, messages));
  }

  readAll(afterPosition?: string, limit?: number): Promise<LoggedMessage[]> {
    return this.log.readAll(this.dataSource.manager, afterPosition, limit);
  }

  readJob(jobId: string, afterPosition?: string, limit?: number): Promise<LoggedMessage[]> {
    return this.log.readJob(this.dataSource.manager, jobId, afterPosition, limit);
  }

  latestOfType<T extends MessageType>(jobId: string, type: T): Promise<MessageOf<T> | null> {
    return this.log.latestOfType(this.dataSource.manager, jobId, type);
  }

  close(): Promise<void> {
    return this.closeFn();
  }
}
