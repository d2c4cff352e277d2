/** A trajectory the pool follows: who holds it and how far it got. */
export interface PoolTrajectory {
  trajectoryId: string;
  owner: string | null;
  lastTurnIndex: number;
  status: 'in-flight' | 'completed' | 'reassigned' | 'aborted';
}

/**
 * The pool's in-flight trajectories, sharded by id. The pool folds one event per tool turn; with a flat
 * record every turn copied every trajectory in flight (hundreds), which dominated the rollout manager's
 * time (and the simulator's: 870 k turns for a 100-step SWE job). With shards a turn copies the shard
 * index and one shard, and the state stays an immutable plain object. The pool now evolves in place
 * (`put` / `delete`, nothing copied); the copying operations stay for callers that keep a table whole.
 */
export type TrajectoryTable = Record<string, Record<string, PoolTrajectory>>;

const SHARDS = 64;

function shardOf(trajectoryId: string): string {
  let h = 2166136261;
  for (let i = 0; i < trajectoryId.length; i++) h = Math.imul(h ^ trajectoryId.charCodeAt(i), 16777619) >>> 0;
  return String(h % SHARDS);
}

export const Trajectories = {
  empty: (): TrajectoryTable => ({}),

  get(table: TrajectoryTable, trajectoryId: string): PoolTrajectory | undefined {
    return table[shardOf(trajectoryId)]?.[trajectoryId];
  },

  set(table: TrajectoryTable, t: PoolTrajectory): TrajectoryTable {
    const shard = shardOf(t.trajectoryId);
    return { ...table, [shard]: { ...table[shard], [t.trajectoryId]: t } };
  },

  setMany(table: TrajectoryTable, ts: readonly PoolTrajectory[]): TrajectoryTable {
    let next = table;
    for (const t of ts) next = Trajectories.set(next, t);
    return next;
  },

  remove(table: TrajectoryTable, trajectoryId: string): TrajectoryTable {
    const shard = shardOf(trajectoryId);
    if (!table[shard]?.[trajectoryId]) return table;
    const rest = { ...table[shard] };
    delete rest[trajectoryId];
    return { ...table, [shard]: rest };
  },

  /** Adds or replaces `t` in `table` itself. */
  put(table: TrajectoryTable, t: PoolTrajectory): void {
    const shard = shardOf(t.trajectoryId);
    (table[shard] ??= {})[t.trajectoryId] = t;
  },

  /** Removes a trajectory from `table` itself. */
  delete(table: TrajectoryTable, trajectoryId: string): void {
    const shard = table[shardOf(trajectoryId)];
    if (shard) delete shard[trajectoryId];
  },

  all(table: TrajectoryTable): PoolTrajectory[] {
    return Object.values(table).flatMap((shard) => Object.values(shard));
  },

  count(table: TrajectoryTable): number {
    let n = 0;
    for (const shard of Object.values(table)) n += Object.keys(shard).length;
    return n;
  },
};
