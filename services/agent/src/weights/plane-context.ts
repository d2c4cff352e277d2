import { Logger } from '@nestjs/common';
import { DataOf, MessageOf } from '@robustrl/contracts';
import { UcxWorker } from '@robustrl/ucx';
import { PullLimits } from './bucket-puller';
import { HeldCopies, HeldCopy } from './held-copies';
import { WeightServer } from './weight-server';

export interface WeightPlaneConfig {
  jobId: string;
  machineId: string;
  /**
   * UCX listener: the host pullers reach it at (an IPv4 address, or a name resolved to one at start),
   * the port (0: any free port), and the address it binds — null: the advertised address itself, so the
   * weight server listens on that interface only, not on every one.
   */
  bindHost: string | null;
  port: number;
  advertiseHost: string;
  /** Where the named shared-memory regions live (`/dev/shm`). */
  shmDir: string;
  limits: PullLimits;
  /**
   * The CUDA device whose memory the weight plane moves (its context is made current before the UCX
   * worker: gpu-offline-build.md rule 2): a number, 'auto' (device 0 where this UCX can register CUDA
   * memory and the driver sees a device; the default) or 'none' (host memory only; no CUDA context).
   */
  cudaDevice?: number | 'auto' | 'none';
  /**
   * This machine's own key (ROBUSTRL_MACHINE_KEY), with identity on: it opens the pull grants sealed
   * for this machine (libs/bus/src/identity/pull-grants.ts). Then an assignment is honoured only with a
   * grant this machine can open, and a region is served only against the grant's token.
   */
  machineKey?: Buffer;
  /**
   * With identity on: this machine's role certificate now (the operator's, or the controller's once lent
   * as a trainer), which its manifests carry so other agents keep them (libs/bus role-certificates.ts).
   */
  publisherCertificate?: () => string | undefined;
  /** The trainer epoch this machine's trainer was started at, which its manifests carry (docs/contributors/recovery.md "Fencing"). */
  trainerEpoch?: () => number | undefined;
}

export type WeightInput = MessageOf<'WeightVersionPublished' | 'WeightPullAssigned' | 'WeightVersionRetired' | 'TrainerReleased'>;
export type Emit = <T extends 'WeightVersionPublished' | 'WeightPullCompleted' | 'WeightPullFailed'>(
  type: T,
  data: DataOf<T>,
  cause?: WeightInput,
) => Promise<string>;

/**
 * What the weight plane's parts share (weight-plane.ts composes them): the configuration, the copies
 * this machine holds, the UCX worker and weight server once started, and how a copy's memory goes.
 */
export interface PlaneContext {
  readonly config: WeightPlaneConfig;
  readonly logger: Logger;
  readonly copies: HeldCopies;
  /** The worker and server, or WeightTransferUnavailableError with the reason. */
  ready(): { worker: UcxWorker; server: WeightServer };
  /** The weight server, or undefined before start (or without UCX). */
  server(): WeightServer | undefined;
  stopping(): boolean;
  /** Lets a copy's memory go (pull-staging.ts: after a grace period, its staging file at once). */
  release(copy: HeldCopy): void;
}
