import { agentConfigFromEnv } from '../agent-config';
import { GCE_PREEMPTION_NOTICE_MS, GCE_TERMINATION_NOTICE_MS, noticeDetail, noticeHeaders, parseNoticeSources, readNotice } from './cloud-notices';

const now = new Date('2026-11-28T10:00:00.000Z');

describe('cloud notices: what each provider says, read as a deadline', () => {
  it('EC2 spot: 404 is no notice; an instance action gives its action and time', () => {
    expect(readNotice('aws-spot', { status: 404, body: 'Not Found' }, now)).toBeNull();
    const notice = readNotice('aws-spot', { status: 200, body: '{"action": "terminate", "time": "2026-11-28T10:02:00Z"}' }, now)!;
    expect(notice.what).toBe("EC2 spot instance action 'terminate'");
    expect(notice.deadline.toISOString()).toBe('2026-11-28T10:02:00.000Z');
    expect(noticeDetail(notice, now)).toBe("EC2 spot instance action 'terminate': this machine goes by 2026-11-28T10:02:00.000Z (in 120 s)");
    expect(() => readNotice('aws-spot', { status: 200, body: '{"action": "stop"}' }, now)).toThrow('no "action" and "time"');
    expect(() => readNotice('aws-spot', { status: 200, body: 'oops' }, now)).toThrow('not JSON');
    expect(() => readNotice('aws-spot', { status: 500, body: '' }, now)).toThrow('answered 500');
  });

  it('Compute Engine: a preemption gives 30 s, a terminating maintenance 60 s, a live migration nothing', () => {
    expect(readNotice('gce-preempted', { status: 200, body: 'FALSE' }, now)).toBeNull();
    expect(readNotice('gce-preempted', { status: 200, body: 'TRUE\n' }, now)!.deadline.getTime()).toBe(now.getTime() + GCE_PREEMPTION_NOTICE_MS);
    expect(() => readNotice('gce-preempted', { status: 200, body: 'maybe' }, now)).toThrow('neither TRUE nor FALSE');
    expect(readNotice('gce-maintenance', { status: 200, body: 'NONE' }, now)).toBeNull();
    expect(readNotice('gce-maintenance', { status: 200, body: 'MIGRATE_ON_HOST_MAINTENANCE' }, now)).toBeNull();
    const stop = readNotice('gce-maintenance', { status: 200, body: 'TERMINATE_ON_HOST_MAINTENANCE' }, now)!;
    expect(stop.deadline.getTime()).toBe(now.getTime() + GCE_TERMINATION_NOTICE_MS);
    expect(noticeHeaders('gce-preempted')).toEqual({ 'Metadata-Flavor': 'Google' });
  });

  it("Azure: a departure of this VM with its NotBefore; a freeze, another VM's event or none is no notice", () => {
    const events = (list: unknown[]) => ({ status: 200, body: JSON.stringify({ DocumentIncarnation: 2, Events: list }) });
    expect(readNotice('azure', events([]), now, 'vm-1')).toBeNull();
    expect(
      readNotice('azure', events([{ EventId: 'f', EventType: 'Freeze', Resources: ['vm-1'], NotBefore: 'Sat, 28 Nov 2026 10:00:15 GMT' }]), now, 'vm-1'),
    ).toBeNull();
    expect(
      readNotice('azure', events([{ EventId: 'o', EventType: 'Preempt', Resources: ['vm-2'], NotBefore: 'Sat, 28 Nov 2026 10:00:30 GMT' }]), now, 'vm-1'),
    ).toBeNull();
    const mine = readNotice(
      'azure',
      events([{ EventId: 'e1', EventType: 'Preempt', Resources: ['vm-1'], NotBefore: 'Sat, 28 Nov 2026 10:00:30 GMT' }]),
      now,
      'vm-1',
    )!;
    expect(mine).toMatchObject({ what: 'Azure scheduled event Preempt', key: 'azure/e1' });
    expect(mine.deadline.toISOString()).toBe('2026-11-28T10:00:30.000Z');
    // Started already: NotBefore is empty, the machine goes now.
    expect(readNotice('azure', events([{ EventId: 'e2', EventType: 'Terminate', Resources: ['vm-1'], NotBefore: '' }]), now, 'vm-1')!.deadline).toEqual(now);
    expect(noticeHeaders('azure')).toEqual({ Metadata: 'true' });
  });

  it('sources are format=url pairs; a bad one is named', () => {
    expect(parseNoticeSources('aws-spot=http://169.254.169.254/latest/meta-data/spot/instance-action, gce-preempted=http://m/p')).toEqual([
      { format: 'aws-spot', url: 'http://169.254.169.254/latest/meta-data/spot/instance-action' },
      { format: 'gce-preempted', url: 'http://m/p' },
    ]);
    expect(() => parseNoticeSources('oracle=http://x')).toThrow("'oracle=http://x' is not format=url");
    expect(() => parseNoticeSources('azure=ftp://x')).toThrow("'ftp://x' is not an http(s) URL");
  });
});

describe("the agent's notice settings (ROBUSTRL_AGENT_NOTICES)", () => {
  const base = { ROBUSTRL_JOB_ID: 'j', ROBUSTRL_MACHINE_ID: 'm', ROBUSTRL_ROLE: 'rollout' };

  it('none by default; several sources with a poll period; a bad one refuses the start, naming it', () => {
    expect(agentConfigFromEnv(base).notices.sources).toEqual([]);
    const config = agentConfigFromEnv({
      ...base,
      ROBUSTRL_AGENT_NOTICES: 'azure=http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01',
      ROBUSTRL_AGENT_NOTICE_POLL_SECONDS: '2',
      ROBUSTRL_AGENT_AZURE_VM_NAME: 'vm-7',
    });
    expect(config.notices).toEqual({
      sources: [{ format: 'azure', url: 'http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01' }],
      pollMs: 2_000,
      vmName: 'vm-7',
    });
    expect(() => agentConfigFromEnv({ ...base, ROBUSTRL_AGENT_NOTICES: 'spot=http://x' })).toThrow(
      /agent configuration is invalid: ROBUSTRL_AGENT_NOTICES: 'spot=http:\/\/x' is not format=url/,
    );
  });
});
