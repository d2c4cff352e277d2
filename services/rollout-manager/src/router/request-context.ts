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
}

/** What the caller was answered with: recording stores it as the trajectory's next turn. */
export interface Answer {
  /** Chat: the assistant message; completions: the text. */
  content: unknown;
  finishReason: string | null;
  tokens: number;
  /** The engines that generated part of it, in order (more than one after a continuation). */
  engines: EngineView[];
}
