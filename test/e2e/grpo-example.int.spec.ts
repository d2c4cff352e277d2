import { execFileSync, spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';

/**
 * The GRPO example (examples/grpo) and robustrl's Python side on the real things: Ray, PyTorch training on
 * two torchrun ranks over gloo, a vLLM engine loading every version in place through robustrl's worker
 * extension, distributed checkpoints and a resume. They are pytest suites run in the environment
 * deploy/local/vllm.sh makes (the global setup ensures it); vLLM and torch missing there fail them
 * instead of skipping (ROBUSTRL_REQUIRE_VLLM / _TORCH / _RAY / _VERL).
 */
const REPO = resolve(__dirname, '..', '..');
const VLLM_SH = join(REPO, 'deploy', 'local', 'vllm.sh');

function venv(): { python: string; model: string } {
  const [python, model] = execFileSync('bash', [VLLM_SH, 'status'], { encoding: 'utf8' }).trim().split('\n');
  return { python, model };
}

function run(python: string, args: string[], cwd: string, model: string, timeoutMs: number): string {
  const result = spawnSync(python, args, {
    cwd,
    encoding: 'utf8',
    timeout: timeoutMs,
    env: {
      ...process.env,
      PYTHONDONTWRITEBYTECODE: '1',
      ROBUSTRL_REQUIRE_VLLM: '1',
      ROBUSTRL_REQUIRE_TORCH: '1',
      ROBUSTRL_REQUIRE_RAY: '1',
      ROBUSTRL_REQUIRE_VERL: '1',
      ROBUSTRL_GRPO_TEST_MODEL: model,
      ROBUSTRL_AGENT_URL: '',
      // One thread per process: the engine, two ranks and pytest share two cores.
      OMP_NUM_THREADS: '1',
    },
  });
  const output = `${result.stdout}${result.stderr}`;
  if (result.error) throw new Error(`${python} ${args.join(' ')}: ${result.error.message}\n${output.slice(-4000)}`);
  if (result.status !== 0) throw new Error(`${python} ${args.join(' ')} exited with ${result.status ?? result.signal}:\n${output.slice(-8000)}`);
  return output;
}

describe('Python side on real torch and vLLM (deploy/local/vllm.sh)', () => {
  it("robustrl's Python package passes its suite with torch and Ray present (named weights round trip, the Ray worker group on a three-node Ray cluster, the verl backend and worker groups against verl's own classes)", () => {
    const { python, model } = venv();
    const output = run(python, ['-m', 'unittest', '-v'], join(REPO, 'clients', 'python'), model, 600_000);
    expect(output).toMatch(/^OK$/m);
    expect(output).not.toMatch(/skipped/);
    expect(output).toMatch(/test_a_killed_worker_is_reported_to_its_machines_agent_and_nothing_else_restarts/);
    // verl's own RayWorkerGroup, ranks created again in their bundles as the agents' commands say.
    expect(output).toMatch(/test_a_dead_rank_is_created_again_in_its_place_and_the_others_keep_running/);
    expect(output).toMatch(/test_agents_on_their_nodes_are_called_through_a_relay_there/);
  }, 630_000);

  it('the GRPO example passes its pytest suite: GRPO maths, checkpoints, in-place loads into vLLM, the job and its resume', () => {
    const { python, model } = venv();
    const output = run(python, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'tests'], join(REPO, 'examples', 'grpo'), model, 900_000);
    const passed = /(\d+) passed/.exec(output);
    expect(passed).not.toBeNull();
    expect(Number(passed![1])).toBeGreaterThanOrEqual(20);
    expect(output).not.toMatch(/\d+ (failed|skipped|error)/);
  }, 960_000);
});
