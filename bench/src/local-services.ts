import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';

const REPO_ROOT = resolve(__dirname, '..', '..');

/**
 * A connection setting (KAFKA_BROKERS, DATABASE_URL) from the environment, or else start the local
 * services (idempotent) and take it from what `deploy/local/services.sh env` prints.
 */
export function localServiceSetting(name: 'KAFKA_BROKERS' | 'DATABASE_URL', progress: (line: string) => void): string {
  const given = process.env[name];
  if (given) return given;
  const script = resolve(REPO_ROOT, 'deploy/local/services.sh');
  progress(`${name} is unset: starting local services (bash ${script} up)`);
  let value: string | undefined;
  try {
    execFileSync('bash', [script, 'up'], { stdio: ['ignore', 2, 2] });
    const env = execFileSync('bash', [script, 'env'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 2] });
    value = new RegExp(`^${name}=(.*)$`, 'm').exec(env)?.[1]?.trim();
  } catch (err) {
    throw new Error(`could not start the local services with ${script}: ${(err as Error).message}`);
  }
  if (!value) throw new Error(`${script} env printed no ${name} line`);
  return value;
}
