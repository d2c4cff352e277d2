import type { TokenSpan } from '@robustrl/contracts';
import { ServerResponse } from 'node:http';
import { EngineView } from './engine-pool';
import { Api, Json } from './stream-splice';
import { TrajectoryIdentity } from './trajectory-identity';

/**
 * One generation request as the HTTP surface parsed it, handed to failover (which answers the caller
 * on `res`, possibly across engines) and, for a recorded request, to recording.
 */
export interface RequestContext {
  api: Api;
  path: string;
  body: Json;
  stream: boolean;
  identity: TrajectoryIdentity | null;
  /** Index the answer will have in the trajectory (null: not recorded). */
  outputIndex: number | null;
  res: ServerResponse;
  /** Aborted when an unrecorded request's caller goes away: nobody wants the rest. */
  abort: AbortController;
  /**
   * Awaited before the caller gets the last byte of the answer (the JSON body, or the stream's end):
   * recording stores the answer as the trajectory's turn first, so a caller never holds a turn the store
   * lacks (it could complete the trajectory, and the turn would be refused as closed). When it throws
   * the caller gets an error instead of the end of the answer, and asks again.
   */
  beforeAnswer?: (answer: Answer) => Promise<void>;
}

/** What the caller was answered with: recording stores it as the trajectory's next turn. */
export interface Answer {
  /** Chat: the assistant message; completions: the text. */
  content: unknown;
  finishReason: string | null;
  tokens: number;
  /**
   * The engines that generated part of it, in order (more than one after a continuation), each with the
   * weight version it served the answer with: the version it said in its answer's
   * `x-robustrl-weight-version` header when it says one (the truth, even while the pool's view of it lags
   * a weight update), else the version the pool knows it holds.
   */
  engines: EngineView[];
  /** What each engine sampled of it (token ids, log-probs), when they reported ids; empty otherwise. */
  spans: TokenSpan[];
  /** Whether it holds tool calls, where that is known without reading `content` (a stream relayed unparsed: lean-relay.ts). */
  toolCalls?: boolean;
}

/** Engines that hot-swap weights say which version produced an answer: the router tags the turn with it. */
export const WEIGHT_VERSION_HEADER = 'x-robustrl-weight-version';
