import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InProcessBus } from '@robustrl/bus';
import { decodeMessage, MessageOf, Topics } from '@robustrl/contracts';
import { MESSAGE_BUS } from '@robustrl/service-kit';
import { JobStartController } from './job-start.controller';

describe('POST /v1/jobs/:jobId/start: a job announced over HTTP, as robustrl job start does', () => {
  let bus: InProcessBus;
  let app: INestApplication;
  let url: string;
  const post = async (jobId: string, body: unknown) => {
    const res = await fetch(`${url}/v1/jobs/${encodeURIComponent(jobId)}/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const announced = () =>
    bus
      .read(Topics.membership)
      .map((r) => decodeMessage(r.value))
      .flatMap((d) => (d.ok && d.message.type === 'JobStarted' ? [d.message as MessageOf<'JobStarted'>] : []));

  beforeEach(async () => {
    bus = new InProcessBus();
    const moduleRef = await Test.createTestingModule({ controllers: [JobStartController], providers: [{ provide: MESSAGE_BUS, useValue: bus }] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  });
  afterEach(async () => {
    await app.close();
    await bus.close();
  });

  it('publishes JobStarted with the defaults filled in; the same run id is the same event id', async () => {
    const first = await post('job-42', { trainerMachines: 2, rolloutMachines: 4, runId: 'launch-1', detection: { agentSilentWindowSeconds: 30 } });
    expect(first.status).toBe(202);
    const again = await post('job-42', { trainerMachines: 2, rolloutMachines: 4, runId: 'launch-1', detection: { agentSilentWindowSeconds: 30 } });
    expect(again.body.eventId).toBe(first.body.eventId);
    const [message] = announced();
    expect(message).toMatchObject({
      jobId: 'job-42',
      eventId: first.body.eventId,
      source: 'controller/job-start',
      data: { mode: 'semi-sync', trainerMachines: 2, rolloutMachines: 4, resumedFromStep: null, detection: { agentSilentWindowSeconds: 30 } },
    });
    const other = await post('job-42', { trainerMachines: 2, runId: 'launch-2' });
    expect(other.body.eventId).not.toBe(first.body.eventId);
  });

  it('a bad announcement is a 400 naming every field, and nothing is published', async () => {
    const bad = await post('job 42', { mode: 'fast', trainerMachines: -1, resumedFromStep: 'x' });
    expect(bad.status).toBe(400);
    expect((bad.body.issues as Array<{ path: string }>).map((i) => i.path).sort()).toEqual(['jobId', 'mode', 'resumedFromStep', 'runId', 'trainerMachines']);
    expect(announced()).toEqual([]);
  });
});
