import { StoreMigration } from '@robustrl/store';
import { TrajectoryStore1763900000000 } from './0003-trajectory-store';
import { TurnTokenSpans1795500000000 } from './0004-turn-token-spans';
import { TrajectoryOutcome1795600000000 } from './0005-trajectory-outcome';
import { StorageTuning1795700000000 } from './0006-storage-tuning';

/**
 * The request manager's own tables (the trajectory store), in order. Run by the store next to its
 * core migrations; the names keep the timestamps they had when the store ran them, so a database
 * that already has them does not run them again.
 */
export const TRAJECTORY_STORE_MIGRATIONS: readonly StoreMigration[] = [
  TrajectoryStore1763900000000,
  TurnTokenSpans1795500000000,
  TrajectoryOutcome1795600000000,
  StorageTuning1795700000000,
];
