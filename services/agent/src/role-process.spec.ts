import { alive, descendantsOf } from './process-tree';
import { RoleExit, RoleProcess } from './role-process';

describe('role process', () => {
  it('stop takes down the whole tree, SIGKILLing what ignores SIGTERM, and is not an unexpected exit', async () => {
    const exits: RoleExit[] = [];
    const role = new RoleProcess({ stopGraceMs: 300, onExit: (e) => exits.push(e) });
    // A shell whose child ignores SIGTERM and would outlive its parent.
    const pid = await role.start(`sh -c 'trap "" TERM; while true; do sleep 1; done' & wait`, {});
    let tree: number[] = [];
    for (let i = 0; i < 100 && tree.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 20));
      tree = [pid, ...descendantsOf(pid)];
    }
    expect(tree.length).toBeGreaterThanOrEqual(2);
    await role.stop();
    expect(tree.filter(alive)).toEqual([]);
    expect(exits).toEqual([expect.objectContaining({ unexpected: false })]);
  });

  it('an exit nobody asked for is reported as unexpected, with its signal', async () => {
    const exits: RoleExit[] = [];
    const role = new RoleProcess({ stopGraceMs: 300, onExit: (e) => exits.push(e) });
    await role.start('exec sleep 30', {});
    process.kill(role.pid!, 'SIGKILL');
    for (let i = 0; i < 100 && exits.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(exits).toEqual([{ code: null, signal: 'SIGKILL', unexpected: true }]);
    expect(role.running).toBe(false);
  });

  it("inherits the agent's environment except the credentials it withholds, and gets what it is given", async () => {
    const lines: string[] = [];
    const exits: RoleExit[] = [];
    const role = new RoleProcess({ stopGraceMs: 300, onExit: (e) => exits.push(e), onOutput: (l) => lines.push(l), withheldEnv: ['ROBUSTRL_SPEC_SECRET'] });
    process.env.ROBUSTRL_SPEC_SECRET = 'agent-only-0123456789';
    process.env.ROBUSTRL_SPEC_SHARED = 'shared';
    try {
      await role.start('echo "secret=${ROBUSTRL_SPEC_SECRET:-absent} shared=$ROBUSTRL_SPEC_SHARED given=$ROBUSTRL_AGENT_TOKEN"', {
        ROBUSTRL_AGENT_TOKEN: 'for-the-framework-0123',
      });
      for (let i = 0; i < 100 && exits.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      // Withheld from the child's copy, not removed from the agent's own environment.
      expect(process.env.ROBUSTRL_SPEC_SECRET).toBe('agent-only-0123456789');
    } finally {
      delete process.env.ROBUSTRL_SPEC_SECRET;
      delete process.env.ROBUSTRL_SPEC_SHARED;
    }
    expect(lines).toEqual(['secret=absent shared=shared given=for-the-framework-0123']);
    expect(exits).toEqual([{ code: 0, signal: null, unexpected: true }]);
  });
});
