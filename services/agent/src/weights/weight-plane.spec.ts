import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AgentCommandVerifier,
  controllerKeyPairOf,
  controlPlaneRecordKeyPairOf,
  InProcessBus,
  machineKeyOf,
  MachineSigner,
  PublicationVoucher,
  RecordSigner,
  roleCertificateOf,
  sealPullGrant,
  ServiceSigner,
} from '@robustrl/bus';
import { createMessage, DataOf, encodeMessage, MessageOf, publicationDigest, RobustrlMessage, Topics } from '@robustrl/contracts';
import { UcxWorker, ucxInfo } from '@robustrl/ucx';
import { eventually } from '@robustrl/testing/eventually';
import { bufferReader, fullChecksum } from './bucket-checksum';
import { WeightPlane } from './weight-plane';
import { Catalog, CATALOG_REQUEST_TAG, CATALOG_TAG, CatalogRequest, Hello, HELLO_TAG } from './weight-server';

/**
 * Three weight planes in one process, each with its own UCX worker and server, talking over real UCX
 * (tcp loopback, peer error handling). The test plays the registry: it publishes the assignments.
 */
const JOB = 'job-plane';
const KiB = 1024;
const SIZES = [64 * KiB, 256 * KiB, 1 * KiB, 512 * KiB];
const describeUcx = ucxInfo().available ? describe : describe.skip;

describeUcx('weight plane over real UCX (trainer → rollout → relay)', () => {
  // A directory of our own stands in for /dev/shm (the layout and naming are the same).
  const shm = mkdtempSync(join(tmpdir(), 'robustrl-shm-'));
  const bus = new InProcessBus();
  const seen: RobustrlMessage[] = [];
  const planes: WeightPlane[] = [];
  const limits = { chunkBytes: 128 * KiB, maxBytesPerSecond: 0, opTimeoutMs: 5_000, catalogWaitMs: 3_000 };
  const emitFrom =
    (machineId: string) =>
    async <T extends 'WeightVersionPublished' | 'WeightPullCompleted' | 'WeightPullFailed'>(type: T, data: DataOf<T>) => {
      const m = createMessage(type, data, { jobId: JOB, source: `agent/${machineId}`, occurredAt: new Date().toISOString() });
      await bus.publish(m as RobustrlMessage);
      return m.eventId;
    };
  // rollout-1 names its host (resolved to 127.0.0.1) and no bind address: it listens on the advertised one.
  const plane = (machineId: string, host: { bindHost: string | null; advertiseHost: string } = { bindHost: '127.0.0.1', advertiseHost: '127.0.0.1' }) => {
    const p = new WeightPlane({ jobId: JOB, machineId, ...host, port: 0, shmDir: shm, limits }, bus, emitFrom(machineId));
    planes.push(p);
    return p;
  };
  const trainer = plane('trainer-0');
  const rollout = plane('rollout-0');
  const relayPuller = plane('rollout-1', { bindHost: null, advertiseHost: 'localhost' });
  const weights = Buffer.alloc(SIZES.reduce((a, b) => a + b, 0));
  for (let i = 0; i < weights.length; i++) weights[i] = (i * 2654435761) >>> 24;
  let pullSeq = 0;

  const outcomeOf = (pullId: string) =>
    eventually(
      `outcome of ${pullId}`,
      () =>
        seen.find((m) => (m.type === 'WeightPullCompleted' || m.type === 'WeightPullFailed') && (m.data as { pullId: string }).pullId === pullId) as
          MessageOf<'WeightPullCompleted' | 'WeightPullFailed'> | undefined,
      15_000,
    );
  async function assign(
    version: number,
    bucketIndex: number,
    _puller: WeightPlane & { address: string | null },
    pullerId: string,
    source: { id: string; plane: WeightPlane },
  ) {
    const pullId = `w${version}/b${bucketIndex}/${pullerId}#${++pullSeq}`;
    await bus.publish(
      createMessage(
        'WeightPullAssigned',
        { pullId, version, bucketIndex, pullerId, sourceId: source.id, sourceAddress: source.plane.address! },
        { jobId: JOB, source: 'registry', occurredAt: new Date().toISOString() },
      ) as RobustrlMessage,
    );
    return outcomeOf(pullId);
  }

  beforeAll(async () => {
    await bus.subscribe({ groupId: 'observer', topics: [Topics.weights], handler: async (d) => void seen.push(d.message) });
    for (const p of planes) expect(await p.start()).toMatch(/^127\.0\.0\.1:\d+$/);
    writeFileSync(join(shm, 'trainer-v1'), weights);
  });

  it('listens on the advertised address only (a name resolved to IPv4), not on every interface', () => {
    const port = Number(relayPuller.address!.split(':')[1]);
    // Listening TCP sockets of this process's network namespace: local address (hex, little-endian IPv4) and port.
    const listening = readFileSync('/proc/net/tcp', 'utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((f) => f[3] === '0A' && parseInt(f[1].split(':')[1], 16) === port)
      .map((f) => f[1].split(':')[0]);
    expect(relayPuller.address).toBe(`127.0.0.1:${port}`);
    expect(listening).toEqual(['0100007F']);
  });
  afterAll(async () => {
    for (const p of planes) await p.stop();
    await bus.close();
    rmSync(shm, { recursive: true, force: true });
  });

  it('the trainer publishes a manifest: sha256 per bucket and its weight server (where its region lies is not published)', async () => {
    const res = await trainer.publish({ version: 1, step: 7, shmName: 'trainer-v1', bucketSizes: SIZES });
    const manifest = await eventually('manifest', () => seen.find((m): m is MessageOf<'WeightVersionPublished'> => m.type === 'WeightVersionPublished'));
    let offset = 0;
    const expected = SIZES.map((n) => fullChecksum(bufferReader(weights.subarray(offset, (offset += n))), n));
    expect(res.checksums).toEqual(expected);
    expect(manifest.data).toMatchObject({
      version: 1,
      step: 7,
      totalBytes: weights.length,
      buckets: SIZES.map((sizeBytes, index) => ({ index, sizeBytes, checksum: expected[index] })),
    });
    expect(manifest.data.sources).toEqual([{ instanceId: 'trainer-0', address: trainer.address }]);
  });

  it('a rollout pulls every bucket from the trainer into its /dev/shm staging file, byte-exact', async () => {
    for (let b = 0; b < SIZES.length; b++) {
      const outcome = await assign(1, b, rollout, 'rollout-0', { id: 'trainer-0', plane: trainer });
      expect(outcome.type).toBe('WeightPullCompleted');
    }
    const latest = rollout.latest()!;
    expect(latest).toMatchObject({ version: 1, step: 7, kind: 'pulled', totalBytes: weights.length });
    expect(readFileSync(latest.path!).equals(weights)).toBe(true);
  });

  it('another rollout pulls a bucket from that rollout (a relay, found through its catalog)', async () => {
    const outcome = await assign(1, 1, relayPuller, 'rollout-1', { id: 'rollout-0', plane: rollout });
    expect(outcome).toMatchObject({ type: 'WeightPullCompleted', data: { sourceId: 'rollout-0', bytes: SIZES[1] } });
    expect(relayPuller.status().versions).toEqual([expect.objectContaining({ version: 1, heldBuckets: 1, totalBuckets: 4, complete: false })]);
  });

  it("a source's region goes only to a puller the registry assigned: nothing unasked, a refusal for anyone else", async () => {
    // A peer on the network with its own UCX worker, not one of the planes.
    const peer = new UcxWorker();
    try {
      const [host, port] = rollout.address!.split(':');
      const ep = await peer.connect(host, Number(port), { timeoutMs: 3_000 });
      const hello = JSON.parse((await peer.recvTag(HELLO_TAG, { timeoutMs: 3_000, maxLength: 4096 })).data.toString()) as Hello;
      expect(hello.from).toBe(rollout.address);
      // Connected and said hello to, but asked nothing: no catalog comes (it used to be pushed on connect).
      await expect(peer.recvTag(CATALOG_TAG, { timeoutMs: 500, maxLength: 1 << 20 })).rejects.toThrow();

      // An assignment from rollout-0 to some other machine (no plane here executes it).
      await bus.publish(
        createMessage(
          'WeightPullAssigned',
          { pullId: 'p-other', version: 1, bucketIndex: 1, pullerId: 'rollout-9', sourceId: 'rollout-0', sourceAddress: rollout.address! },
          { jobId: JOB, source: 'registry', occurredAt: new Date().toISOString() },
        ) as RobustrlMessage,
      );
      const ask = async (request: Omit<CatalogRequest, 'nonce'>) => {
        await ep.sendTag(CATALOG_REQUEST_TAG, Buffer.from(JSON.stringify({ ...request, nonce: hello.nonce })), { timeoutMs: 3_000 });
        return JSON.parse((await peer.recvTag(CATALOG_TAG, { timeoutMs: 6_000, maxLength: 1 << 20 })).data.toString()) as Catalog;
      };
      expect(await ask({ pullId: 'p-other', pullerId: 'intruder', version: 1 })).toEqual({
        from: rollout.address,
        entries: [],
        refused: { version: 1, reason: 'pull p-other was assigned to rollout-9 for version 1, not to intruder for version 1' },
      });
      expect((await ask({ pullId: 'p-made-up', pullerId: 'intruder', version: 1 })).refused?.reason).toBe(
        'the weight registry assigned no pull p-made-up from rollout-0 to intruder',
      );
      // The assigned puller, asking for its pull, gets that version's region and nothing else.
      const granted = await ask({ pullId: 'p-other', pullerId: 'rollout-9', version: 1 });
      expect(granted.refused).toBeUndefined();
      expect(granted.entries).toEqual([{ version: 1, rkeys: [expect.any(String)], buckets: expect.any(Array) }]);
      // Every bucket of the /dev/shm version, back to back in its one region, under its one key.
      const buckets = granted.entries[0].buckets;
      expect(buckets.map((b) => b.length)).toEqual(SIZES);
      expect(buckets.every((b) => b.rkey === 0 && b.memoryType === 'host')).toBe(true);
      expect(BigInt(buckets[1].address) - BigInt(buckets[0].address)).toBe(BigInt(SIZES[0]));
      await ep.close({ force: true });
    } finally {
      peer.close();
    }
  });

  it('bytes that do not match the manifest fail the pull with a checksum reason (the registry re-pulls)', async () => {
    // The trainer's memory changes under the published manifest (a torn write): bucket 2 no longer matches.
    const path = join(shm, 'trainer-v1');
    const corrupt = Buffer.from(weights);
    corrupt[SIZES[0] + SIZES[1] + 5] ^= 0xff;
    writeFileSync(path, corrupt);
    const outcome = await assign(1, 2, relayPuller, 'rollout-1', { id: 'trainer-0', plane: trainer });
    expect(outcome.type).toBe('WeightPullFailed');
    expect((outcome.data as { reason: string }).reason).toMatch(/^checksum mismatch on bucket 2: expected sha256:[0-9a-f]{64}, got sha256:[0-9a-f]{64}$/);
    writeFileSync(path, weights);
  });

  it('a trainer whose process died stops serving at once: the pull fails, blaming the source', async () => {
    await trainer.withdrawPublished('the trainer process was killed by SIGKILL');
    const outcome = await assign(1, 3, relayPuller, 'rollout-1', { id: 'trainer-0', plane: trainer });
    expect(outcome.type).toBe('WeightPullFailed');
    expect((outcome.data as { reason: string }).reason).toMatch(/^source 127\.0\.0\.1:\d+ (unreachable|does not serve)/);
    // The relay still serves it.
    expect((await assign(1, 3, relayPuller, 'rollout-1', { id: 'rollout-0', plane: rollout })).type).toBe('WeightPullCompleted');
  });

  it('a retired version is dropped: the staging file goes, the copy is no longer offered', async () => {
    const path = rollout.latest()!.path!;
    await bus.publish(
      createMessage('WeightVersionRetired', { version: 1 }, { jobId: JOB, source: 'registry', occurredAt: new Date().toISOString() }) as RobustrlMessage,
    );
    await eventually('staging removed', () => (existsSync(path) ? undefined : true));
    expect(rollout.status().versions).toEqual([]);
    expect(rollout.latest()).toBeNull();
  });
});

describeUcx('weight plane with identity on: a region only against the pull grant sealed for its puller', () => {
  const SECRET = 'weight-plane-spec-identity-secret-0123456789';
  const shm = mkdtempSync(join(tmpdir(), 'robustrl-shm-'));
  // The agents' check of what they read (this bus signs nothing: records below are signed by hand).
  const verifier = new AgentCommandVerifier(controllerKeyPairOf(SECRET).publicKey, controlPlaneRecordKeyPairOf(SECRET).publicKey);
  const bus = new InProcessBus({ identity: { verifier }, logger: { info: () => undefined, warn: () => undefined, error: () => undefined } });
  const seen: RobustrlMessage[] = [];
  const limits = { chunkBytes: 128 * KiB, maxBytesPerSecond: 0, opTimeoutMs: 5_000, catalogWaitMs: 1_500 };
  const signedRecord = (message: RobustrlMessage, signer: RecordSigner) => {
    const topic = Topics.weights;
    const value = encodeMessage(message);
    return { topic, key: JOB, value, headers: signer.sign({ topic, key: JOB, value }, message) };
  };
  // Each plane's records signed as its agent's bus would (MachineSigner); the trainer's manifests carry its role certificate.
  const plane = (machineId: string) => {
    const signer = new MachineSigner(machineId, machineKeyOf(SECRET, machineId));
    const certificate = machineId.startsWith('trainer') ? roleCertificateOf(SECRET, machineId, 'trainer') : undefined;
    return new WeightPlane(
      {
        jobId: JOB,
        machineId,
        bindHost: '127.0.0.1',
        advertiseHost: '127.0.0.1',
        port: 0,
        shmDir: shm,
        limits,
        machineKey: machineKeyOf(SECRET, machineId),
        publisherCertificate: () => certificate,
      },
      bus,
      async (type, data) => {
        const m = createMessage(type, data, { jobId: JOB, source: `agent/${machineId}`, occurredAt: new Date().toISOString() });
        await bus.publishRaw(signedRecord(m as RobustrlMessage, signer));
        return m.eventId;
      },
    );
  };
  const trainer = plane('trainer-0');
  const rollout = plane('rollout-0');
  const weights = Buffer.alloc(
    SIZES.reduce((a, b) => a + b, 0),
    7,
  );
  const OTHER_SECRET = 'another-deployments-secret-0123456789abcdef';
  let trainerManifest: DataOf<'WeightVersionPublished'>;
  /** As the registry assigns (the trainer's publication named and vouched for), or as another agent could forge one. */
  const assignment = (
    pullId: string,
    pullerId: string,
    grant: 'sealed' | 'none' | 'other-secret',
    opts: { bucketIndex?: number; publication?: string; vouchedWith?: string } = {},
  ) => {
    const data: DataOf<'WeightPullAssigned'> = {
      pullId,
      version: 1,
      bucketIndex: opts.bucketIndex ?? 0,
      pullerId,
      sourceId: 'trainer-0',
      sourceAddress: trainer.address!,
      publication: opts.publication ?? publicationDigest(trainerManifest),
    };
    const secret = grant === 'sealed' ? SECRET : OTHER_SECRET;
    if (grant !== 'none')
      data.grant = {
        ...sealPullGrant(secret, data),
        publicationTag: new PublicationVoucher(opts.vouchedWith ?? secret).vouch({ ...data, publication: data.publication! }),
      };
    return createMessage('WeightPullAssigned', data, { jobId: JOB, source: 'weight-registry', occurredAt: new Date().toISOString() }) as RobustrlMessage;
  };
  const outcomeOf = (pullId: string) =>
    eventually(
      `outcome of ${pullId}`,
      () => seen.find((m) => (m.type === 'WeightPullCompleted' || m.type === 'WeightPullFailed') && (m.data as { pullId: string }).pullId === pullId),
      15_000,
    );

  beforeAll(async () => {
    await bus.subscribe({ groupId: 'observer', topics: [Topics.weights], handler: async (d) => void seen.push(d.message) });
    await trainer.start();
    await rollout.start();
    writeFileSync(join(shm, 'trainer-v1'), weights);
    await trainer.publish({ version: 1, step: 1, shmName: 'trainer-v1', bucketSizes: SIZES });
    trainerManifest = (await eventually('manifest', () => seen.find((m) => m.type === 'WeightVersionPublished'))).data as DataOf<'WeightVersionPublished'>;
  });
  afterAll(async () => {
    await trainer.stop();
    await rollout.stop();
    await bus.close();
    rmSync(shm, { recursive: true, force: true });
  });

  it("the registry's grant: the puller opens it, presents the token, and pulls", async () => {
    await bus.publish(assignment('g-1', 'rollout-0', 'sealed'));
    expect(await outcomeOf('g-1')).toMatchObject({ type: 'WeightPullCompleted', data: { bytes: SIZES[0] } });
  });

  it('an assignment without a grant it can open is not carried out by the puller, nor honoured by the source', async () => {
    await bus.publish(assignment('g-none', 'rollout-0', 'none'));
    expect(((await outcomeOf('g-none')).data as { reason: string }).reason).toMatch(/carries no grant rollout-0 can open/);
    await bus.publish(assignment('g-forged', 'rollout-0', 'other-secret'));
    expect(((await outcomeOf('g-forged')).data as { reason: string }).reason).toMatch(/carries no grant rollout-0 can open/);
  });

  it("manifests another agent published under the trainer's version are not kept, however many; a publication the registry did not vouch for is not pulled", async () => {
    // Other checksums under version 1 (any agent may write the weights topic). Kept, a rogue's manifest
    // was what the rollout verified against; a dozen crowded the trainer's out of those kept.
    const rogue = {
      ...trainerManifest,
      buckets: trainerManifest.buckets.map((b) => ({ ...b, checksum: `${b.checksum.slice(0, -1)}${b.checksum.endsWith('0') ? '1' : '0'}` })),
    };
    const rogueSigner = new MachineSigner('rollout-9', machineKeyOf(SECRET, 'rollout-9'));
    const published = (data: DataOf<'WeightVersionPublished'>) =>
      signedRecord(
        createMessage('WeightVersionPublished', data, { jobId: JOB, source: 'agent/rollout-9', occurredAt: new Date().toISOString() }) as RobustrlMessage,
        rogueSigner,
      );
    const deadLettered = () => bus.deadLetterCounts().reduce((n, c) => n + (c.reason === 'unauthenticated' ? c.count : 0), 0);
    const before = deadLettered();
    const { publisherCertificate: trainerCertificate, ...uncertified } = rogue;
    expect(trainerCertificate).toBe(roleCertificateOf(SECRET, 'trainer-0', 'trainer'));
    for (let i = 0; i < 10; i++) await bus.publishRaw(published({ ...uncertified, step: 100 + i }));
    // The trainer's certificate copied: it does not make the rogue's signature the trainer's.
    await bus.publishRaw(published(rogue));
    // Refused by every reader (the two planes, this spec's observer), 11 records each.
    await eventually('the rogue manifests refused', () => (deadLettered() - before >= 33 ? true : undefined));
    expect(seen.filter((m) => m.type === 'WeightVersionPublished')).toHaveLength(1);
    await bus.publish(assignment('g-4', 'rollout-0', 'sealed', { bucketIndex: 1 }));
    expect(await outcomeOf('g-4')).toMatchObject({ type: 'WeightPullCompleted', data: { bucketIndex: 1, bytes: SIZES[1] } });
    // The rogue's digest named, but not vouched for by this deployment's registry: not pulled.
    await bus.publish(assignment('g-5', 'rollout-0', 'sealed', { bucketIndex: 2, publication: publicationDigest(rogue), vouchedWith: OTHER_SECRET }));
    expect(((await outcomeOf('g-5')).data as { reason: string }).reason).toMatch(/names no publication the weight registry vouched for to rollout-0/);
  });

  it("a retirement or release another agent wrote is ignored (the copy stays); the registry's, signed by the control plane, is acted on", async () => {
    const copy = rollout.status().versions.find((v) => v.version === 1);
    expect(copy).toBeDefined();
    const retire = (source: string) =>
      createMessage('WeightVersionRetired', { version: 1 }, { jobId: JOB, source, occurredAt: new Date().toISOString() }) as RobustrlMessage;
    const release = (source: string) =>
      createMessage(
        'TrainerReleased',
        { version: 1, step: 1, reason: 'all-rollouts-hold' },
        { jobId: JOB, source, occurredAt: new Date().toISOString() },
      ) as RobustrlMessage;
    const rogue = new MachineSigner('rollout-9', machineKeyOf(SECRET, 'rollout-9'));
    const deadLettered = () => bus.deadLetterCounts().reduce((n, c) => n + (c.reason === 'unauthenticated' ? c.count : 0), 0);
    const before = deadLettered();
    await bus.publishRaw(signedRecord(retire('agent/rollout-9'), rogue));
    await bus.publishRaw(signedRecord(release('agent/rollout-9'), rogue));
    // Refused by every reader of the topic — the trainer's plane, the rollout's, this spec's observer —
    // each dead-lettering both records (no ledger in one process): the rollout has read both when six are.
    await eventually('the forged records refused', () => (deadLettered() - before >= 6 ? true : undefined));
    expect(rollout.status().versions.map((v) => v.version)).toContain(1);
    expect(rollout.status().versions.find((v) => v.version === 1)?.trainerReleased).toBe(false);

    await bus.publishRaw(signedRecord(retire('weight-registry'), new ServiceSigner('weight-registry', SECRET)));
    await eventually('the genuine retirement acted on', () => (rollout.status().versions.some((v) => v.version === 1) ? undefined : true));
  });

  it('a peer that read a genuine assignment off the topic, naming it without the token, is refused; a forged assignment naming it is ignored', async () => {
    const peer = new UcxWorker();
    try {
      await bus.publish(assignment('g-2', 'rollout-7', 'sealed'));
      // Written by another agent (any may write the weights topic), without the registry's grant.
      await bus.publish(assignment('g-3', 'intruder', 'other-secret'));
      const [host, port] = trainer.address!.split(':');
      const ep = await peer.connect(host, Number(port), { timeoutMs: 3_000 });
      const hello = JSON.parse((await peer.recvTag(HELLO_TAG, { timeoutMs: 3_000, maxLength: 4096 })).data.toString()) as Hello;
      const ask = async (request: Omit<CatalogRequest, 'nonce'>) => {
        await ep.sendTag(CATALOG_REQUEST_TAG, Buffer.from(JSON.stringify({ ...request, nonce: hello.nonce })), { timeoutMs: 3_000 });
        return JSON.parse((await peer.recvTag(CATALOG_TAG, { timeoutMs: 6_000, maxLength: 1 << 20 })).data.toString()) as Catalog;
      };
      expect((await ask({ pullId: 'g-2', pullerId: 'rollout-7', version: 1 })).refused?.reason).toBe(
        "pull g-2 asked for without its grant's token: only rollout-7 holds it",
      );
      expect((await ask({ pullId: 'g-2', pullerId: 'rollout-7', version: 1, token: Buffer.alloc(32, 1).toString('base64url') })).refused?.reason).toMatch(
        /without its grant's token/,
      );
      expect((await ask({ pullId: 'g-3', pullerId: 'intruder', version: 1 })).refused?.reason).toBe(
        'the weight registry assigned no pull g-3 from trainer-0 to intruder',
      );
      await ep.close({ force: true });
    } finally {
      peer.close();
    }
  });
});
