import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { scriptedScenario } from './scripted-scenario';

/** `npm start` as a newcomer runs it: the built embedded entry, no external service. */
describe('embedded main job', () => {
  it('runs the control plane in one process: the scripted fault is detected and a recovery decided; the malformed record is dead-lettered', () => {
    const env: NodeJS.ProcessEnv = { ...process.env, ROBUSTRL_JOB_ID: 'spec-job' };
    delete env.KAFKA_BROKERS;
    delete env.DATABASE_URL;
    const out = execFileSync(process.execPath, [join(__dirname, '..', 'dist', 'main.js')], { env, encoding: 'utf8', timeout: 60_000 });
    const events = scriptedScenario('spec-job', new Date()).length;
    expect(out).toMatch(/bus=in-process, store=pglite, job=spec-job/);
    // The scenario's events, then the weight registry's first pull of the published version (one
    // source serves one puller a bucket at a time), the detector's verdict, the controller's decision
    // and command, and the rollout manager moving the trajectory that was in flight on rollout-2.
    expect(out.split('\n').filter((l) => / job=spec-job /.test(l))).toHaveLength(events + 5);
    expect(out).toMatch(/WeightPullAssigned .* version=1 bucketIndex=0 pullerId=rollout-0 sourceId=trainer-0\/dp0/);
    expect(out).toMatch(/FaultConfirmed .* machineId=rollout-2 role=rollout rule=explicit-signal .* handledAs=rollout machineFaulty=true/);
    expect(out).toMatch(/RecoveryDecided .* machineId=rollout-2 action=replace-rollout rule=rollout-fault/);
    expect(out).toMatch(/TrajectoriesReassigned .* fromRolloutId=rollout-2\/dp2 reason="rollout rollout-2 confirmed faulty \(explicit-signal\)" assignments=\[1\]/);
    expect(out).toMatch(new RegExp(`events in the event log for spec-job: ${events + 5} \\(${events} from the scenario, 5 decided by the control plane; each stored once\\)`));
    // The malformed telemetry record reaches the printer, the three services consuming telemetry and the
    // controller's ETTR projector (a fresh group per start: it rebuilds from the beginning).
    expect(out).toMatch(/dead letters: 5 \(not JSON\), consumed by: controller, controller-ettr-[0-9a-f-]+, detector, embedded-printer-spec-job, rollout-manager/);
  });
});
