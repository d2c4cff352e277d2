import { CommandMailbox, FrameworkCommand } from './command-mailbox';

const restart = (commandId: string): FrameworkCommand => ({ commandId, type: 'RestartRolloutEngine', recoveryId: 'r-1' });

describe('the command mailbox of cooperate mode', () => {
  it('offers a command on every poll until it is acknowledged (at least once), then settles it with the outcome', async () => {
    const box = new CommandMailbox();
    const outcome = box.offer(restart('c-1'));
    expect((await box.poll(0)).map((c) => c.commandId)).toEqual(['c-1']);
    // A framework that crashed before acknowledging sees it again.
    expect((await box.poll(0)).map((c) => c.commandId)).toEqual(['c-1']);
    expect(box.acknowledge('c-1')).toBe('acknowledged');
    expect(await box.poll(0)).toEqual([]);
    expect(box.openCommands()).toEqual([{ commandId: 'c-1', type: 'RestartRolloutEngine', acknowledged: true }]);
    expect(box.answer('c-1', { ok: true })).toBe('settled');
    await expect(outcome).resolves.toEqual({ ok: true });
    expect(box.openCommands()).toEqual([]);
  });

  it('an outcome without an acknowledgement acknowledges; the same outcome again is accepted once, another is refused', async () => {
    const box = new CommandMailbox();
    const outcome = box.offer(restart('c-1'));
    expect(box.answer('c-1', { ok: false, error: 'engine would not start' })).toBe('settled');
    await expect(outcome).resolves.toEqual({ ok: false, error: 'engine would not start' });
    expect(box.answer('c-1', { ok: false, error: 'engine would not start' })).toBe('already-settled');
    expect(box.answer('c-1', { ok: true })).toBe('conflicts');
    expect(box.acknowledge('c-1')).toBe('already-settled');
    expect(box.answer('nope', { ok: true })).toBe('unknown');
    expect(box.acknowledge('nope')).toBe('unknown');
  });

  it('the same command offered twice (a redelivered record) is one command; both offers get its outcome', async () => {
    const box = new CommandMailbox();
    const first = box.offer(restart('c-1'));
    const second = box.offer(restart('c-1'));
    expect(await box.poll(0)).toHaveLength(1);
    box.answer('c-1', { ok: true });
    await expect(Promise.all([first, second])).resolves.toEqual([{ ok: true }, { ok: true }]);
    // Offered after it settled: the outcome at once, nothing offered again.
    await expect(box.offer(restart('c-1'))).resolves.toEqual({ ok: true });
    expect(await box.poll(0)).toEqual([]);
  });

  it('a waiting poll returns as soon as a command is offered, and after its wait when none is', async () => {
    const box = new CommandMailbox();
    const started = Date.now();
    const poll = box.poll(5_000);
    setTimeout(() => void box.offer(restart('c-1')), 50);
    expect((await poll).map((c) => c.commandId)).toEqual(['c-1']);
    expect(Date.now() - started).toBeLessThan(2_000);
    box.acknowledge('c-1');
    const waited = Date.now();
    expect(await box.poll(100)).toEqual([]);
    expect(Date.now() - waited).toBeGreaterThanOrEqual(90);
  });

  it('a stop notice expects no outcome: gone once acknowledged', async () => {
    const box = new CommandMailbox();
    box.notify({ commandId: 'stop/fenced/x', type: 'StopRole', reason: 'a newer group' });
    box.notify({ commandId: 'stop/fenced/x', type: 'StopRole', reason: 'a newer group' });
    expect(await box.poll(0)).toEqual([{ commandId: 'stop/fenced/x', type: 'StopRole', reason: 'a newer group' }]);
    expect(box.acknowledge('stop/fenced/x')).toBe('acknowledged');
    expect(box.openCommands()).toEqual([]);
  });

  it('the framework is attached while it polls, and for a while after its last poll', async () => {
    let now = 0;
    const box = new CommandMailbox(10_000, () => now);
    expect(box.attached()).toBe(false);
    const poll = box.poll(200);
    now = 60_000;
    expect(box.attached()).toBe(true); // a poll is waiting
    now = 1_000;
    await poll; // ended at 1 s
    now = 11_000;
    expect(box.attached()).toBe(true);
    now = 11_001;
    expect(box.attached()).toBe(false);
  });

  it('closing fails open commands with the reason and ends waiting polls', async () => {
    const box = new CommandMailbox();
    const outcome = box.offer(restart('c-1'));
    box.acknowledge('c-1');
    const poll = box.poll(10_000);
    box.close('the agent stopped');
    await expect(outcome).resolves.toEqual({ ok: false, error: 'the agent stopped' });
    await expect(poll).resolves.toEqual([]);
    await expect(box.offer(restart('c-2'))).resolves.toEqual({ ok: false, error: 'the agent stopped' });
  });
});
