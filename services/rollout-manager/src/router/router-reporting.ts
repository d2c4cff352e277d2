/** What the router tells its operator: log lines and the counters on `OpenAiRouter.stats`. */
export interface RouterLogger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** The default: quiet on info, so a busy router does not log every request. */
export const stderrRouterLogger: RouterLogger = {
  info: () => undefined,
  warn: (msg, fields) => process.stderr.write(`[router] WARN ${msg} ${fields ? JSON.stringify(fields) : ''}\n`),
  error: (msg, fields) => process.stderr.write(`[router] ERROR ${msg} ${fields ? JSON.stringify(fields) : ''}\n`),
};

/** One object shared by the HTTP surface, failover and recording: each counts what it sees. */
export interface RouterStats {
  requests: number;
  failovers: number;
  replays: number;
  recordingErrors: number;
  noEngine503: number;
}
