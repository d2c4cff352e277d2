import { DataOf, Draft, draft, SINGLE_SHARD } from '@robustrl/contracts';
import { foldPublication } from './shard-publication';
import { machineOf, PendingPublication, RegistryData } from './weight-registry.state';

/**
 * Who may publish a weight version (docs/operators/security.md "Who speaks on the bus": authority follows the roster): only the job's
 * trainers, as the registry's own roster says — a version from a rollout machine (one compromised agent)
 * would otherwise become the version every rollout pulls and loads. The record's signature already ties
 * its sources to the machine that signed it (libs/bus identity); this decides whether that machine may.
 *
 * The roster and the publications come on different topics (membership and control against weights), so
 * a trainer's first publication can be read before its registration, and a warm standby's before its
 * promotion. A publication whose publishers are not trainers yet is therefore held, made live the moment
 * the roster says they are, and refused only once it has waited its grace (PUBLICATION_GRACE_MS unless
 * the registry is told otherwise): the refusal is a
 * fact, WeightPublicationRefused, with the reason. Folded by the same functions in the indexed registry
 * and its full recomputation (`domain/weight-registry/test/full-recompute/`), like shard-publication.ts.
 *
 * Fencing (docs/contributors/recovery.md "Fencing"): a publication names the trainer epoch its publisher was started at. One
 * older than the newest group the registry knows of comes from a trainer that group replaced (a machine
 * cut off and back, a process that outlived its restart): it is refused at once, never held, since a
 * fence only rises. A publication with no epoch (an older agent) is not fenced.
 */
export const PUBLICATION_GRACE_MS = 30_000;

/** Roles that train: `hybrid` machines do both in sync mode. */
const PUBLISHING_ROLES: ReadonlySet<string> = new Set(['trainer', 'hybrid']);

type Publication = DataOf<'WeightVersionPublished'>;

/** The machines a publication's sources live on (`<machineId>` or `<machineId>/<rank>`). */
export const publishersOf = (d: Publication): string[] => [...new Set(d.sources.map((s) => machineOf(s.instanceId)))].sort();

/** Why the roster does not let this publication's machines publish (yet), or null when it does. */
export function publisherProblem(data: RegistryData, d: Publication): string | null {
  const publishers = publishersOf(d);
  if (publishers.length === 0) return 'it names no source';
  for (const id of publishers) {
    const m = data.machines[id];
    if (!m) return `${id} is not a machine of this job`;
    if (m.status !== 'alive') return `${id} is no longer in the job (${m.reason})`;
    if (!PUBLISHING_ROLES.has(m.role)) return `${id} is a ${m.role}, not one of the job's trainers`;
  }
  return null;
}

/** Why a publication's trainer epoch is stale, or null when it is current (or names none). */
export function staleEpochProblem(data: RegistryData, d: Publication): string | null {
  const fence = data.trainerEpoch ?? 0;
  if (d.trainerEpoch === undefined || d.trainerEpoch >= fence) return null;
  return `its trainer epoch ${d.trainerEpoch} is stale: the trainer group was formed again at epoch ${fence}`;
}

/** RestartTrainerGroup, RestartTask, a live publication: the fence rises to `epoch`, never falls. */
export function raiseFence(data: RegistryData, epoch: number | undefined): RegistryData {
  if (epoch === undefined || epoch <= (data.trainerEpoch ?? 0)) return data;
  return { ...data, trainerEpoch: epoch };
}

const goLive = (data: RegistryData, p: PendingPublication): RegistryData =>
  foldPublication(raiseFence(data, p.data.trainerEpoch), p.data, p.at, p.publicationId);

/** WeightVersionPublished: made live (shard-publication.ts) when the roster says its publishers are trainers, else held. */
export function foldAuthorizedPublication(data: RegistryData, d: Publication, at: number, publicationId: string): RegistryData {
  // Redelivered: already live (its publisher may have left since, that does not undo it), or already held.
  if (data.versions[d.version]?.shards[(d.shard ?? SINGLE_SHARD).index]?.publicationId === publicationId) return data;
  if (data.pendingPublications[publicationId]) return data;
  if (staleEpochProblem(data, d) === null && publisherProblem(data, d) === null) return goLive(data, { publicationId, data: d, at });
  // Stale ones too: held until the decider refuses them (at once, see publicationRefusals).
  const held: PendingPublication = { publicationId, data: d, at };
  return { ...data, pendingPublications: { ...data.pendingPublications, [publicationId]: held } };
}

/** After a roster change: the held publications whose publishers are trainers now go live, in the order they were published. */
export function adoptPendingPublications(data: RegistryData): RegistryData {
  const ready = Object.values(data.pendingPublications)
    .filter((p) => staleEpochProblem(data, p.data) === null && publisherProblem(data, p.data) === null)
    .sort((a, b) => a.at - b.at || (a.publicationId < b.publicationId ? -1 : 1));
  if (ready.length === 0) return data;
  const pendingPublications = { ...data.pendingPublications };
  for (const p of ready) delete pendingPublications[p.publicationId];
  let next: RegistryData = { ...data, pendingPublications };
  for (const p of ready) {
    // A newer epoch made live just before it fences it: it stays held, to be refused.
    if (staleEpochProblem(next, p.data) === null) next = goLive(next, p);
    else next = { ...next, pendingPublications: { ...next.pendingPublications, [p.publicationId]: p } };
  }
  return next;
}

/** WeightPublicationRefused folded: no longer held. */
export function dropPendingPublication(data: RegistryData, publicationId: string): RegistryData {
  if (!data.pendingPublications[publicationId]) return data;
  const pendingPublications = { ...data.pendingPublications };
  delete pendingPublications[publicationId];
  return { ...data, pendingPublications };
}

/** The decider's step: publications of a stale epoch, and those held for `graceMs` or more, are refused, each with its reason. */
export function publicationRefusals(data: RegistryData, now: number, graceMs = PUBLICATION_GRACE_MS): Draft<'WeightPublicationRefused'>[] {
  return (
    Object.values(data.pendingPublications)
      // A time further ahead than the grace is a publisher's clock that lies (or is broken): no reason to wait.
      .filter((p) => staleEpochProblem(data, p.data) !== null || Math.abs(now - p.at) >= graceMs)
      .sort((a, b) => a.at - b.at || (a.publicationId < b.publicationId ? -1 : 1))
      .map((p) =>
        draft('WeightPublicationRefused', {
          publicationId: p.publicationId,
          version: p.data.version,
          ...(p.data.shard ? { shard: p.data.shard } : {}),
          publishers: publishersOf(p.data).length ? publishersOf(p.data) : ['(none)'],
          reason: refusalReason(data, p.data),
        }),
      )
  );
}

function refusalReason(data: RegistryData, d: Publication): string {
  const stale = staleEpochProblem(data, d);
  if (stale) return `not published by the job's current trainers: ${stale}`;
  return `not published by one of the job's trainers: ${publisherProblem(data, d) ?? 'its publisher was not a trainer within the grace'}`;
}
