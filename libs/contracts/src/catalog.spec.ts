import { randomUUID } from 'node:crypto';
import { createMessage, decodeMessage, encodeMessage, MESSAGE_TYPES, MessageCatalog, topicOf, Topics } from './index';

const ctx = { jobId: 'job-1', source: 'spec', occurredAt: '2026-11-21T10:00:00.000Z' };

describe('message catalog', () => {
  it('round-trips a message through bytes unchanged', () => {
    const m = createMessage(
      'FaultConfirmed',
      {
        verdictId: 'v1',
        machineId: 'gpu-7',
        role: 'hybrid',
        rule: 'rollout-silent',
        evidence: { windowSeconds: 60, probe: { probeId: 'p1', result: 'timed-out' } },
        handledAs: 'trainer',
        machineFaulty: false,
        detectionLatencyMs: 61_000,
      },
      ctx,
    );
    const decoded = decodeMessage(encodeMessage(m));
    expect(decoded).toEqual({ ok: true, message: m });
    expect(m).toMatchObject({ kind: 'event', schemaVersion: 1, causationId: null, correlationId: m.eventId });
  });

  it('routes every type to a robustrl topic', () => {
    const topics = new Set(Object.values(Topics));
    for (const type of MESSAGE_TYPES) expect(topics.has(topicOf(type))).toBe(true);
    expect(topicOf('RestartTrainerGroup')).toBe(Topics.control);
    expect(MessageCatalog.RestartTrainerGroup.kind).toBe('command');
  });

  it('refuses to build an invalid message', () => {
    expect(() =>
      createMessage('GpuActivitySampled', { machineId: 'm', sampledAt: 'yesterday', intervalSeconds: 10, tensorActive: 1.5, source: 'dcgm' }, ctx),
    ).toThrow(/sampledAt|tensorActive/);
  });

  it.each([
    ['not JSON', '{oops', /not JSON/],
    ['an empty value', null, /empty record value/],
    [
      'an unknown type',
      JSON.stringify({ eventId: randomUUID(), type: 'Nope', kind: 'event', schemaVersion: 1, ...ctx, causationId: null, correlationId: 'c', data: {} }),
      /unknown message type 'Nope'/,
    ],
    [
      'a future schema version',
      JSON.stringify({
        eventId: randomUUID(),
        type: 'HeartbeatAcked',
        kind: 'event',
        schemaVersion: 2,
        ...ctx,
        causationId: null,
        correlationId: 'c',
        data: {},
      }),
      /unsupported schemaVersion 2/,
    ],
    ['a bad envelope', JSON.stringify({ type: 'HeartbeatAcked' }), /invalid envelope/],
    [
      'bad data',
      JSON.stringify({
        eventId: randomUUID(),
        type: 'HeartbeatAcked',
        kind: 'event',
        schemaVersion: 1,
        ...ctx,
        causationId: null,
        correlationId: 'c',
        data: { probeId: '' },
      }),
      /invalid HeartbeatAcked/,
    ],
  ])('explains why it rejects %s', (_what, bytes, reason) => {
    const decoded = decodeMessage(bytes);
    expect(decoded.ok).toBe(false);
    if (!decoded.ok) expect(decoded.reason).toMatch(reason);
  });
});
