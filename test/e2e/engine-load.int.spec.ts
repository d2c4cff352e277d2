import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { AgentApiController, agentConfigFromEnv, AgentRuntime } from '@robustrl/agent';
import { MessageBus } from '@robustrl/bus';
import { MESSAGE_BUS, RunningService, runService } from '@robustrl/service-kit';
import { ucxInfo } from '@robustrl/ucx';
import { WeightRegistryModule } from '@robustrl/weight-registry';
import { eventually } from '@robustrl/testing/eventually';
import { startVllmEngine, VllmEngine, vllmPaths } from '@robustrl/harness';

/**
 * The engine loads the weights robustrl moves: two trainer ranks publish their shards of a version (named
 * tensors of the GRPO example's model, perturbed, laid out by robustrl.named_weights as the trainer does),
 * the weight registry schedules the pulls, a rollout machine's agent pulls both shards over UCX and —
 * with ROBUSTRL_ENGINE_WEIGHTS=vllm — loads the version into its real vLLM engine in place. The engine
 * then says it serves that version and answers exactly as transformers does on the same weights.
 */
jest.setTimeout(360_000);

const JOB = 'job-engine-load';

interface Published {
  shards: Array<{ shmName: string; bucketSizes: number[]; tensors: unknown[] }>;
  prompt: number[];
  expected: { tokens: number[]; logprobs: number[] };
}

/** A Python run to its end without blocking this process (the agents live here). */
function python(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(vllmPaths().python, args, { env: { ...process.env, ...env } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`python exited with ${code}: ${err.slice(-3000)}`))));
  });
}

/** Writes version `version` in two shards (each rank's share, as publish.py's ShardWriter does) and what transformers answers on it. */
const WRITE_SHARDS = `
import json, os, sys, torch
from robustrl.named_weights import dtype_name, plan, shard_assignment, write_region
from robustrl_grpo.grpo import token_logprobs
from robustrl_grpo.model import load_model, load_tokenizer
model_dir, shm, version = os.environ["MODEL"], os.environ["SHM"], int(os.environ["VERSION"])
model = load_model(model_dir)
gen = torch.Generator().manual_seed(version)
with torch.no_grad():
    for p in model.parameters():
        p.add_(torch.randn(p.shape, generator=gen) * 0.05)
params = dict(model.named_parameters())
owner = shard_assignment({n: p.numel() * p.element_size() for n, p in params.items()}, 2)
shards = []
for shard in range(2):
    names = [n for n in params if owner[n] == shard]
    layout = plan([(n, dtype_name(params[n]), tuple(params[n].shape)) for n in names], 64 * 1024)
    name = f"rank{shard}-v{version}"
    write_region(os.path.join(shm, name), layout, params)
    shards.append({"shmName": name, "bucketSizes": list(layout.bucket_sizes), "tensors": [e.to_json() for e in layout.tensors]})
prompt = load_tokenizer(model_dir).encode("6+7=", add_special_tokens=False)
ids = list(prompt)
with torch.no_grad():
    for _ in range(3):
        ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    lp = token_logprobs(model(input_ids=torch.tensor([ids])).logits, torch.tensor([ids]))[0, len(prompt):].tolist()
print(json.dumps({"shards": shards, "prompt": prompt, "expected": {"tokens": ids[len(prompt):], "logprobs": lp}}))
`;

describe('an engine loads the weights robustrl moves: two ranks publish shards, a rollout agent pulls them into vLLM', () => {
  if (!ucxInfo().available) {
    it.skip(`needs the native UCX module: ${ucxInfo().reason}`, () => undefined);
    return;
  }
  const shm = mkdtempSync('/dev/shm/robustrl-engine-load-');
  let service: RunningService;
  let bus: MessageBus;
  let engine: VllmEngine;
  const agents: Array<{ runtime: AgentRuntime; app: INestApplication; url: string }> = [];

  async function agent(machineId: string, role: 'trainer' | 'rollout', extra: Record<string, string> = {}): Promise<string> {
    const config = agentConfigFromEnv({
      ROBUSTRL_JOB_ID: JOB,
      ROBUSTRL_MACHINE_ID: machineId,
      ROBUSTRL_ROLE: role,
      ROBUSTRL_GPU_SOURCE: 'emulated',
      ROBUSTRL_GPU_SAMPLE_SECONDS: '3600',
      ROBUSTRL_WEIGHTS_PORT: '0',
      ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
      ROBUSTRL_WEIGHTS_SHM_DIR: shm,
      ROBUSTRL_WEIGHTS_CUDA_DEVICE: 'none',
      ...extra,
    });
    const runtime = new AgentRuntime(bus, config);
    const moduleRef = await Test.createTestingModule({
      controllers: [AgentApiController],
      providers: [{ provide: AgentRuntime, useValue: runtime }],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    await runtime.start(url);
    agents.push({ runtime, app, url });
    return url;
  }

  beforeAll(async () => {
    service = await runService(
      { serviceName: 'e2e-engine-load', bus: { adapter: 'in-process' }, store: { kind: 'pglite' }, httpPort: null },
      [WeightRegistryModule],
      { logLevels: ['error'] },
    );
    bus = service.app.get<MessageBus>(MESSAGE_BUS);
    engine = await startVllmEngine({ id: 'rollout-0' });
  });

  afterAll(async () => {
    for (const a of agents) {
      await a.runtime.stop();
      await a.app.close();
    }
    engine?.kill();
    await engine?.exited;
    await service?.stop();
    rmSync(shm, { recursive: true, force: true });
  });

  it('the engine serves version 1 after the pull, answering as transformers does on the published weights', async () => {
    const trainers = [await agent('trainer-0', 'trainer'), await agent('trainer-1', 'trainer')];
    await agent('rollout-0', 'rollout', { ROBUSTRL_ENGINE_WEIGHTS: 'vllm', ROBUSTRL_INFERENCE_URL: engine.url });
    // A fresh engine serves the model it started from: the agent stamps it as version 0.
    const info = async () => ((await (await fetch(`${engine.url}/weight_info`)).json()) as { weight_version: string }).weight_version;
    await eventually('engine stamped 0', async () => ((await info()) === '0' ? true : undefined), 30_000);

    const published = JSON.parse(await python(['-c', WRITE_SHARDS], { MODEL: vllmPaths().model, SHM: shm, VERSION: '1' })) as Published;
    for (const [rank, url] of trainers.entries()) {
      const shard = published.shards[rank]!;
      const res = await fetch(`${url}/v1/weights/versions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          version: 1,
          step: 1,
          shmName: shard.shmName,
          bucketSizes: shard.bucketSizes,
          tensors: shard.tensors,
          shard: { index: rank, count: 2 },
        }),
      });
      expect(res.status).toBe(202);
    }
    await eventually('engine loaded version 1', async () => ((await info()) === '1' ? true : undefined), 60_000);

    const res = await fetch(`${engine.url}/inference/v1/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token_ids: published.prompt, sampling_params: { max_tokens: 3, temperature: 0, logprobs: 0, ignore_eos: true } }),
    });
    const choice = (
      (await res.json()) as { choices: Array<{ token_ids: number[]; logprobs: { content: Array<{ logprob: number }> }; weight_versions: unknown }> }
    ).choices[0]!;
    expect(choice.weight_versions).toEqual([{ version: '1', start: 0, end: 3 }]);
    expect(choice.token_ids).toEqual(published.expected.tokens);
    choice.logprobs.content.forEach((c, i) => expect(c.logprob).toBeCloseTo(published.expected.logprobs[i]!, 4));
  });
});
