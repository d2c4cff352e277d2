import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..', '..');
const SERVICES = join(ROOT, 'deploy', 'local', 'services.sh');

/** KEY=VALUE lines printed by `deploy/local/services.sh env`. */
export function localServiceEnv(): Record<string, string> {
  const out = execFileSync('bash', [SERVICES, 'env'], { encoding: 'utf8' });
  return Object.fromEntries(
    out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => /^[A-Z_]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

/** Start the real Kafka broker and PostgreSQL server with the project's own scripts (idempotent). */
export function startLocalServices(): void {
  execFileSync('bash', [SERVICES, 'up'], { stdio: 'inherit' });
}

export function stopLocalServices(): void {
  execFileSync('bash', [SERVICES, 'down'], { stdio: 'inherit' });
}
