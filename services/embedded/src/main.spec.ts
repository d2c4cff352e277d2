import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** `npm start` as a newcomer runs it (the built entry, no external service), shortened: 4 steps at 200x. */
describe('the main job', () => {
  it('runs the control plane on an emulated cluster: injected faults are detected and recovered by the services, and the job ends with its ETTR report', () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ROBUSTRL_JOB_ID: 'spec-job',
      ROBUSTRL_STEPS: '4',
      ROBUSTRL_SPEEDUP: '200',
      ROBUSTRL_TIMEOUT_SECONDS: '120',
    };
    delete env.KAFKA_BROKERS;
    delete env.DATABASE_URL;
    const out = execFileSync(process.execPath, [join(__dirname, '..', 'dist', 'main.js')], { env, encoding: 'utf8', timeout: 150_000 });
    expect(out).toMatch(/robustrl main job: the control plane in one process \(bus=in-process, store=pglite\), job spec-job/);
    expect(out).toMatch(/progress: 0\/4 steps trained[\s\S]*progress: 3\/4 steps trained/);
    // The cluster only kills the trainer processes; the detector, the controller and the cluster's
    // agents do the rest: verdict, decision, restart of the trainer group in place, back to training.
    expect(out).toMatch(/detector: trainer-\d \(trainer\) confirmed faulty by explicit-signal/);
    expect(out).toMatch(/controller: restart-trainer-group for trainer-\d \(rule trainer-fault, step \d\)/);
    expect(out).toMatch(/controller: recovery recovered — detect [\d.]+ s, decide [\d.]+ s, restart [\d.]+ s, reconnect [\d.]+ s/);
    const report = out.slice(out.indexOf('ETTR report'));
    expect(report).toMatch(/job time \d\d:\d\d:\d\d for 4 steps on 48 GPUs; faults injected: [1-9]\d*, restarts carried out: [1-9]\d*/);
    const ettr = Number(/ETTR ([\d.]+) %/.exec(report)?.[1]);
    expect(ettr).toBeGreaterThan(30);
    expect(ettr).toBeLessThan(100);
    expect(report).toMatch(/lost [\d.]+ GPU-hours to [a-z-]+(, [\d.]+ to [a-z-]+)*/);
    expect(report).toMatch(/[\d.]+ (GPU-hours )?to restart-trainer-group/);
    expect(report).toMatch(/restart-trainer-group ×\d+: detect/);
    // The malformed record reached the five consumers of telemetry and was dead-lettered once; nothing blocked.
    expect(report).toMatch(/dead letters: 1 /);
  }, 180_000);
});
