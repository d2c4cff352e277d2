import { createServer, RequestListener, Server } from 'node:http';
import { chmodSync, lstatSync, unlinkSync } from 'node:fs';

/**
 * The agent's local API on a Unix socket as well (ROBUSTRL_AGENT_SOCKET): the framework in its own pod or
 * container on the node reaches its agent through a directory both mount (the chart's `agent.socketDir`),
 * with no port on any network — who may call is who may open the file (mode 0660: the agent's user and
 * group). Same routes, same auth as the TCP listener (it serves the same application).
 *
 * A socket file left by a crashed agent is removed first; any other file at the path is refused (the
 * agent says so and does not start), so a wrong setting never deletes a file that is not ours.
 */
export async function listenOnSocket(app: RequestListener, path: string, mode = 0o660): Promise<Server> {
  let existing: ReturnType<typeof lstatSync> | undefined;
  try {
    existing = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (existing && !existing.isSocket()) throw new Error(`ROBUSTRL_AGENT_SOCKET: ${path} exists and is not a socket; not replacing it`);
  if (existing) unlinkSync(path);
  const server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, mode);
  server.once('close', () => {
    try {
      unlinkSync(path);
    } catch {
      // Already gone: nothing to clean.
    }
  });
  return server;
}
