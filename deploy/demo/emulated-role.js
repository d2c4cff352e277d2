#!/usr/bin/env node
'use strict';
/**
 * A stand-in for an RL framework's role process, for demos (the compose file's `demo` profile): what
 * the control plane sees of a trainer or a rollout worker, told to its agent over the agent's local
 * API — phases, steps, GPU activity and checkpoints for a trainer; generation throughput for a rollout.
 *
 *   node emulated-role.js trainer|rollout
 *
 * DEMO_STEP_SECONDS (default 3) is a training step. DEMO_TRAINER_EXIT_AT_STEP=N makes the trainer's
 * first incarnation exit with code 1 at step N — a crash the agent reports, the detector confirms and
 * the controller answers by restarting the trainer in place, from its last checkpoint (paper §5.1).
 * A restarted trainer resumes where the agent tells it (ROBUSTRL_RETRY_STEP, or the step after
 * ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP).
 */
const role = process.argv[2];
if (role !== 'trainer' && role !== 'rollout') {
  process.stderr.write('usage: emulated-role.js trainer|rollout\n');
  process.exit(64);
}
const env = process.env;
const agentUrl = (env.ROBUSTRL_AGENT_URL || 'http://127.0.0.1:8086').replace(/\/+$/, '');
const headers = { 'content-type': 'application/json', ...(env.ROBUSTRL_AGENT_TOKEN ? { authorization: `Bearer ${env.ROBUSTRL_AGENT_TOKEN}` } : {}) };
const stepSeconds = Number(env.DEMO_STEP_SECONDS || 3);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function post(path, body) {
  try {
    const res = await fetch(agentUrl + path, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(2000) });
    if (!res.ok) process.stderr.write(`agent answered ${res.status} to ${path}: ${(await res.text()).slice(0, 200)}\n`);
  } catch (err) {
    process.stderr.write(`agent unreachable (${path}): ${String(err)}\n`);
  }
}

/** A role process follows its agent: on a real machine the agent's death takes it too. */
function agentAlive() {
  try {
    process.kill(Number(env.ROBUSTRL_AGENT_PID), 0);
    return true;
  } catch {
    return false;
  }
}

async function trainer() {
  const retry = env.ROBUSTRL_RETRY_STEP;
  const resume = env.ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP;
  let step = retry ? Number(retry) : resume ? Number(resume) + 1 : 0;
  const exitAt = env.DEMO_TRAINER_EXIT_AT_STEP === undefined ? null : Number(env.DEMO_TRAINER_EXIT_AT_STEP);
  // A trainer the agent restarted is told where to resume: only the first incarnation crashes.
  const firstIncarnation = !retry && !resume;
  console.log(`trainer starting at step ${step}${resume ? ` (checkpoint ${resume})` : ''}`);
  await post('/v1/phase', { phase: 'initializing', step });
  while (agentAlive()) {
    const batchId = `batch-${step}`;
    const started = Date.now();
    await post('/v1/steps/begin', { step, batchId });
    await post('/v1/phase', { phase: 'training', step });
    while (Date.now() - started < stepSeconds * 1000) {
      if (exitAt !== null && firstIncarnation && step === exitAt && Date.now() - started > (stepSeconds * 1000) / 2) {
        console.log(`trainer crashing at step ${step} (DEMO_TRAINER_EXIT_AT_STEP)`);
        process.exit(1);
      }
      await post('/v1/gpu-activity', { tensorActive: 0.8 });
      await sleep(500);
    }
    await post('/v1/steps/end', { step, batchId, durationMs: Date.now() - started });
    await post('/v1/phase', { phase: 'checkpoint', step });
    await post('/v1/checkpoints', { step, uri: `file:///checkpoints/${step}`, blockingMs: 200 });
    await post('/v1/phase', { phase: 'idle', step });
    step += 1;
  }
}

async function rollout() {
  let completed = 0;
  await post('/v1/phase', { phase: 'rollout', step: 0 });
  while (agentAlive()) {
    completed += 3;
    await post('/v1/throughput', {
      windowSeconds: 1,
      tokensPerSecond: 800 + Math.random() * 400,
      completedRequests: completed,
      inFlightRequests: 8,
      awaitingTools: 1,
    });
    await sleep(1000);
  }
}

(role === 'trainer' ? trainer() : rollout()).catch((err) => {
  process.stderr.write(`${role} failed: ${String(err)}\n`);
  process.exit(1);
});
