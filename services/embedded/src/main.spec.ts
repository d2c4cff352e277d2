import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { scriptedScenario } from './scripted-scenario';

/** `npm start` as a newcomer runs it: the built embedded entry, no external service. */
describe('embedded main job', () => {
  it('runs the whole control plane in one process, records each scenario event once, dead-letters the malformed one', () => {
    const env: NodeJS.ProcessEnv = { ...process.env, ROBUSTRL_JOB_ID: 'spec-job' };
    delete env.KAFKA_BROKERS;
    delete env.DATABASE_URL;
    const out = execFileSync(process.execPath, [join(__dirname, '..', 'dist', 'main.js')], { env, encoding: 'utf8', timeout: 60_000 });
    const events = scriptedScenario('spec-job', new Date()).length;
    expect(out).toMatch(/bus=in-process, store=pglite, job=spec-job/);
    expect(out.split('\n').filter((l) => / job=spec-job /.test(l))).toHaveLength(events);
    expect(out).toMatch(new RegExp(`events in the event log for spec-job: ${events} \\(published ${events};`));
    // The malformed telemetry record reaches the printer and the two services consuming telemetry.
    expect(out).toMatch(/dead letters: 3 \(not JSON\), consumed by: detector, embedded-printer-spec-job, rollout-manager/);
  });
});
