import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { localServiceEnv, startLocalServices } from './real-services';

/**
 * Integration tests need a real Kafka broker and a real PostgreSQL server. Use the ones named by
 * KAFKA_BROKERS / DATABASE_URL; otherwise start the project's own (deploy/local/, no Docker).
 */
export default async function globalSetup(): Promise<void> {
  ensureLlamaServer();
  ensureVllm();
  if (process.env.KAFKA_BROKERS && process.env.DATABASE_URL) {
    process.stderr.write(`\nintegration: using KAFKA_BROKERS=${process.env.KAFKA_BROKERS} and DATABASE_URL from the environment\n`);
    return;
  }
  process.stderr.write('\nintegration: starting the local Kafka broker and PostgreSQL server (deploy/local/services.sh up)\n');
  startLocalServices();
  const env = localServiceEnv();
  process.env.KAFKA_BROKERS ??= env.KAFKA_BROKERS;
  process.env.DATABASE_URL ??= env.DATABASE_URL;
  process.env.ROBUSTRL_TEST_STARTED_SERVICES = '1';
}

/**
 * The router's end-to-end tests run real inference engines: llama.cpp's server, built once
 * from PyPI's llama-cpp-python sdist with a tiny model written by the `gguf` package (about 3 minutes
 * the first time on 2 cores; cached in .local/llama after that).
 */
function ensureLlamaServer(): void {
  const script = resolve(__dirname, '..', '..', '..', 'deploy', 'local', 'llama.sh');
  try {
    execFileSync('bash', [script, 'status'], { stdio: 'ignore' });
    return;
  } catch {
    process.stderr.write("\nintegration: building llama.cpp's llama-server and the tiny test model (deploy/local/llama.sh ensure, about 3 min once)\n");
  }
  execFileSync('bash', [script, 'ensure'], { stdio: ['ignore', 'inherit', 'inherit'] });
}

/**
 * The GRPO example's tests run real PyTorch training and a real vLLM engine: a virtual environment from
 * deploy/local/vllm/requirements.lock (about 3 GB from PyPI, a few minutes the first time; cached in
 * .local/vllm after that) and the example's base model, made locally.
 */
function ensureVllm(): void {
  const script = resolve(__dirname, '..', '..', '..', 'deploy', 'local', 'vllm.sh');
  try {
    execFileSync('bash', [script, 'status'], { stdio: 'ignore' });
    return;
  } catch {
    process.stderr.write('\nintegration: installing torch and vLLM and making the GRPO base model (deploy/local/vllm.sh ensure, a few minutes once)\n');
  }
  execFileSync('bash', [script, 'ensure'], { stdio: ['ignore', 'inherit', 'inherit'] });
}
