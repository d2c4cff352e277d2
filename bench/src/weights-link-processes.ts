/**
 * The child processes of the single-link benchmark (weights-link.ts): readiness lines, output tails for
 * error messages, stopping, killing leftovers at exit, free ports, CPU time and listening sockets.
 */
import { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { HOST, MIB } from './weights-link-types';

export const errMsg = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Resolves with the rest of the first stdout line that starts with `marker` (UCX may print its own warnings
 * on stdout first); rejects when the process exits or the deadline passes first.
 */
export async function markedLine(proc: ChildProcess, what: string, marker: string, timeoutMs: number, stderrTail: () => string): Promise<string> {
  return new Promise<string>((resolveLine, reject) => {
    let buf = '';
    const done = (err: Error | null, line?: string) => {
      clearTimeout(timer);
      proc.stdout!.off('data', onData);
      proc.off('close', onExit);
      proc.off('error', onError);
      if (err) reject(err);
      else resolveLine(line!);
    };
    const onData = (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith(marker)) return done(null, line.slice(marker.length));
      }
    };
    const onExit = (code: number | null, signal: string | null) =>
      done(new Error(`${what} exited (${signal ?? `code ${code}`}) before it was ready${tailNote(stderrTail())}`));
    const onError = (err: Error) => done(new Error(`${what} could not start: ${err.message}`));
    const timer = setTimeout(() => done(new Error(`${what} not ready after ${timeoutMs} ms${tailNote(stderrTail())}`)), timeoutMs);
    proc.stdout!.on('data', onData);
    proc.once('close', onExit); // 'close': after stdout/stderr ended, so the stderr tail is complete
    proc.once('error', onError);
  });
}

/** The last lines of a process's output for an error message; for a UCX crash report, its signal line and top frames. */
export function tailNote(text: string): string {
  const lines = text.trim().split('\n');
  const crash = lines.findIndex((l) => /Caught signal/.test(l));
  const pick =
    crash >= 0
      ? [
          lines[crash],
          ...lines
            .slice(crash + 1)
            .filter((l) => /^\s*\d+\s/.test(l))
            .slice(0, 6),
        ]
      : lines.slice(-3);
  const t = pick
    .map((l) => l.trim().replace(/\s+/g, ' '))
    .join(' | ')
    .slice(-1200);
  return t ? `: ${t}` : '';
}

/** Collects a stream's last 16 KiB. */
export function collect(stream: NodeJS.ReadableStream | null): () => string {
  let text = '';
  stream?.on('data', (d: Buffer) => {
    text = (text + d.toString()).slice(-16384);
  });
  return () => text;
}

export async function stopProcess(proc: ChildProcess, graceMs = 3000): Promise<void> {
  if (proc.pid === undefined || proc.exitCode !== null || proc.signalCode !== null) return; // never started, or gone
  const exited = once(proc, 'exit').catch(() => undefined);
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Children still running; killed when this process exits (process.exit, also from a signal handler), so none is orphaned. */
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

export function track(proc: ChildProcess): ChildProcess {
  liveChildren.add(proc);
  proc.once('exit', () => liveChildren.delete(proc));
  proc.once('error', () => liveChildren.delete(proc));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const p of liveChildren) p.kill('SIGKILL');
    });
  }
  return proc;
}

/** A TCP port that was free a moment ago (ucx_perftest needs a fixed -p). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, HOST);
  await once(srv, 'listening');
  const { port } = srv.address() as { port: number };
  srv.close();
  await once(srv, 'close');
  return port;
}

/** Per-operation deadline: generous (a 10 MiB/s floor, at least 60 s), only to turn a hang into an error. */
export const opTimeoutMs = (sizeBytes: number) => Math.max(60_000, Math.ceil(sizeBytes / (10 * MIB)) * 1000);

/** CPU time (user + system) of another process in ms, from /proc/<pid>/stat (USER_HZ = 100); null if unreadable. */
export function processCpuMs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/** Whether something listens on TCP `port` (Linux /proc/net/tcp{,6}); null where that cannot be read. */
function isListening(port: number): boolean | null {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let readable = false;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    readable = true;
    // "  sl  local_address rem_address   st ..." — st 0A = LISTEN
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 3 && f[1].endsWith(hex) && f[3] === '0A') return true;
    }
  }
  return readable ? false : null;
}

/** 'listening', or why not: the process failed to start or exited, or the deadline passed. */
export async function waitListening(proc: ChildProcess, port: number, timeoutMs: number): Promise<string> {
  let startError: string | null = null;
  proc.once('error', (err) => (startError = err.message));
  const deadline = Date.now() + timeoutMs;
  const started = Date.now();
  for (;;) {
    if (startError) return `could not start: ${startError}`;
    if (proc.exitCode !== null || proc.signalCode !== null) return `exited (${proc.signalCode ?? `code ${proc.exitCode}`}) before listening`;
    const l = isListening(port);
    if (l === true) return 'listening';
    if (l === null && Date.now() - started >= 1000) return 'listening'; // no /proc: give it a second
    if (Date.now() > deadline) return `not listening on port ${port} after ${timeoutMs} ms`;
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function runToExit(proc: ChildProcess, timeoutMs: number): Promise<{ code: number | null; signal: string | null; timedOut: boolean }> {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill('SIGKILL');
  }, timeoutMs);
  try {
    const [code, signal] = (await once(proc, 'exit')) as [number | null, string | null];
    return { code, signal, timedOut };
  } finally {
    clearTimeout(timer);
  }
}
