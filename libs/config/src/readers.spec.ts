import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { custom, fileOrValue, int, number, oneOf, onOff, seconds, secondsOrOff, text, url } from './readers';
import { ConfigError, register, registeredSettings } from './registry';
import { renderReference } from './reference';

const owner = 'spec';
const about = (meaning: string) => ({ owner, meaning });

describe('configuration readers', () => {
  it('seconds: a number > 0, or ≥ 0 where 0 means something; unset or empty is the default', () => {
    const timeout = seconds('SPEC_TIMEOUT_SECONDS', { ...about('a timeout'), default: 600 });
    expect(timeout.read({})).toBe(600);
    expect(timeout.read({ SPEC_TIMEOUT_SECONDS: '' })).toBe(600);
    expect(timeout.read({ SPEC_TIMEOUT_SECONDS: ' 2.5 ' })).toBe(2.5);
    expect(() => timeout.read({ SPEC_TIMEOUT_SECONDS: '0' })).toThrow("SPEC_TIMEOUT_SECONDS must be a positive number of seconds, got '0'");
    expect(() => timeout.read({ SPEC_TIMEOUT_SECONDS: '10s' })).toThrow(ConfigError);
    const poll = seconds('SPEC_POLL_SECONDS', { ...about('a poll'), default: 2, zero: 'never polled' });
    expect(poll.read({ SPEC_POLL_SECONDS: '0' })).toBe(0);
    expect(() => poll.read({ SPEC_POLL_SECONDS: '-1' })).toThrow('SPEC_POLL_SECONDS must be a number of seconds ≥ 0 (0: never polled)');
    const optional = seconds('SPEC_OPTIONAL_SECONDS', { ...about('optional'), default: undefined });
    expect(optional.read({})).toBeUndefined();
  });

  it("secondsOrOff: 'off' reads as null", () => {
    const retention = secondsOrOff('SPEC_RETENTION_SECONDS', { ...about('retention'), default: 3600 });
    expect(retention.read({ SPEC_RETENTION_SECONDS: 'off' })).toBeNull();
    expect(retention.read({ SPEC_RETENTION_SECONDS: '60' })).toBe(60);
    expect(() => retention.read({ SPEC_RETENTION_SECONDS: 'never' })).toThrow(/SPEC_RETENTION_SECONDS must be a positive number of seconds or 'off'/);
  });

  it('int and number: whole numbers within their range, numbers above a bound', () => {
    const budget = int('SPEC_BUDGET', { ...about('a budget'), default: 2, min: 0 });
    expect(budget.read({ SPEC_BUDGET: '0' })).toBe(0);
    expect(() => budget.read({ SPEC_BUDGET: '1.5' })).toThrow('SPEC_BUDGET must be a whole number ≥ 0');
    expect(() => budget.read({ SPEC_BUDGET: '-1' })).toThrow(ConfigError);
    const port = int('SPEC_PORT', { ...about('a port'), default: 8080, min: 0, max: 65535 });
    expect(() => port.read({ SPEC_PORT: '70000' })).toThrow('SPEC_PORT must be a whole number from 0 to 65535');
    const ratio = number('SPEC_RATIO', { ...about('a ratio'), default: 1, above: 0 });
    expect(ratio.read({ SPEC_RATIO: '1e-3' })).toBe(0.001);
    expect(() => ratio.read({ SPEC_RATIO: '0' })).toThrow('SPEC_RATIO must be a number > 0');
  });

  it('onOff, oneOf, url and text take only their forms', () => {
    const gaps = onOff('SPEC_GAPS', { ...about('gaps'), default: true });
    expect(gaps.read({})).toBe(true);
    expect(gaps.read({ SPEC_GAPS: 'off' })).toBe(false);
    expect(() => gaps.read({ SPEC_GAPS: 'yes' })).toThrow("SPEC_GAPS must be on or off, got 'yes'");
    const policy = oneOf('SPEC_POLICY', ['role-based', 'task-restart'], { ...about('policy'), default: 'role-based' });
    expect(policy.read({ SPEC_POLICY: 'task-restart' })).toBe('task-restart');
    expect(() => policy.read({ SPEC_POLICY: 'none' })).toThrow('SPEC_POLICY must be role-based or task-restart');
    const kind = oneOf('SPEC_KIND', ['a', 'b', 'c'], { ...about('kind'), default: undefined });
    expect(() => kind.read({ SPEC_KIND: 'd' })).toThrow('SPEC_KIND must be one of a, b, c');
    const endpoint = url('SPEC_URL', { ...about('an endpoint'), default: undefined });
    expect(endpoint.read({ SPEC_URL: 'https://host:8443/x' })).toBe('https://host:8443/x');
    expect(() => endpoint.read({ SPEC_URL: 'host:8443' })).toThrow('SPEC_URL must be a URL, http://… or https://…');
    expect(() => endpoint.read({ SPEC_URL: 'ftp://host' })).toThrow(ConfigError);
    const name = text('SPEC_NAME', { ...about('a name'), default: 'default', pattern: /^[a-z]+$/, accepted: 'lower-case letters' });
    expect(() => name.read({ SPEC_NAME: 'A1' })).toThrow('SPEC_NAME must be lower-case letters');
  });

  it('custom: a parser of its own, its form named in the error', () => {
    const shard = custom('SPEC_SHARD', {
      ...about('a shard'),
      default: null,
      accepted: '<index>/<count>',
      parse: (raw) => (/^\d+\/\d+$/.test(raw) ? raw.split('/').map(Number) : undefined),
    });
    expect(shard.read({ SPEC_SHARD: '1/4' })).toEqual([1, 4]);
    expect(shard.read({})).toBeNull();
    expect(() => shard.read({ SPEC_SHARD: 'two' })).toThrow("SPEC_SHARD must be <index>/<count>, got 'two'");
  });

  it('fileOrValue: the value, else the file named by _FILE (trimmed), else none; an unreadable file is named', () => {
    const secret = fileOrValue('SPEC_SECRET', about('a secret'));
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-config-'));
    try {
      writeFileSync(join(dir, 's'), 'from-file\n');
      expect(secret.read({ SPEC_SECRET: 'given', SPEC_SECRET_FILE: join(dir, 's') })).toBe('given');
      expect(secret.read({ SPEC_SECRET_FILE: join(dir, 's') })).toBe('from-file');
      expect(secret.read({})).toBeUndefined();
      expect(() => secret.read({ SPEC_SECRET_FILE: join(dir, 'missing') })).toThrow(/SPEC_SECRET_FILE: cannot read .*missing/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fileOrValue: the file may win, or both set and an empty file may be refused; the _FILE entry says which', () => {
    const password = fileOrValue('SPEC_PASSWORD', { ...about('a password'), both: 'file wins' });
    const key = fileOrValue('SPEC_KEY', { ...about('a key'), both: 'refused', emptyFile: 'refused' });
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-config-'));
    try {
      writeFileSync(join(dir, 's'), ' from-file\n');
      writeFileSync(join(dir, 'empty'), '\n');
      expect(password.read({ SPEC_PASSWORD: 'given', SPEC_PASSWORD_FILE: join(dir, 's') })).toBe('from-file');
      expect(password.read({ SPEC_PASSWORD: 'given', SPEC_PASSWORD_FILE: join(dir, 'empty') })).toBeUndefined();
      expect(password.read({ SPEC_PASSWORD: 'given', SPEC_PASSWORD_FILE: ' ' })).toBe('given');
      expect(key.read({ SPEC_KEY: ' given ' })).toBe('given');
      expect(key.read({ SPEC_KEY_FILE: join(dir, 's') })).toBe('from-file');
      expect(() => key.read({ SPEC_KEY: 'given', SPEC_KEY_FILE: join(dir, 's') })).toThrow('SPEC_KEY and SPEC_KEY_FILE are both set: give one');
      expect(() => key.read({ SPEC_KEY_FILE: join(dir, 'empty') })).toThrow(`SPEC_KEY_FILE: ${join(dir, 'empty')} is empty`);
      expect(() => key.read({ SPEC_KEY_FILE: join(dir, 'missing') })).toThrow(/SPEC_KEY_FILE: cannot read .*missing/);
      const files = registeredSettings().filter((s) => s.name === 'SPEC_PASSWORD_FILE' || s.name === 'SPEC_KEY_FILE');
      expect(files.map((s) => [s.name, s.meaning, s.accepted])).toEqual([
        ['SPEC_KEY_FILE', "a file holding `SPEC_KEY`'s value (a mounted secret); not with `SPEC_KEY` too", 'a readable, non-empty file'],
        ['SPEC_PASSWORD_FILE', "a file holding `SPEC_PASSWORD`'s value (a mounted secret); it wins over `SPEC_PASSWORD`", 'a readable file'],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the registry', () => {
  it('every reader registers its variable once, with its owner, meaning, form and default', () => {
    seconds('SPEC_REGISTERED_SECONDS', { ...about('registered'), default: 5 });
    seconds('SPEC_REGISTERED_SECONDS', { ...about('registered'), default: 5 });
    const mine = registeredSettings().filter((s) => s.name === 'SPEC_REGISTERED_SECONDS');
    expect(mine).toEqual([{ name: 'SPEC_REGISTERED_SECONDS', owner, meaning: 'registered', accepted: 'a positive number of seconds', defaultText: '5' }]);
  });

  it('refuses the same variable and owner registered differently, and a name no environment has', () => {
    seconds('SPEC_TWICE_SECONDS', { ...about('once'), default: 5 });
    expect(() => seconds('SPEC_TWICE_SECONDS', { ...about('once'), default: 6 })).toThrow(/SPEC_TWICE_SECONDS is registered twice for spec/);
    expect(() => register({ name: 'spec-lower', owner, meaning: '', accepted: '', defaultText: '' })).toThrow(/environment variable/);
  });

  it('the reference: a table per owner, pipes escaped', () => {
    const md = renderReference([
      { name: 'B_VAR', owner: 'agent', meaning: 'b | c', accepted: 'text', defaultText: 'none' },
      { name: 'A_VAR', owner: 'controller', meaning: 'a', accepted: 'on or off', defaultText: 'on' },
    ]);
    expect(md).toContain('## agent\n\n| variable | meaning | accepted | default |\n|---|---|---|---|\n| `B_VAR` | b \\| c | text | none |');
    expect(md.indexOf('## agent')).toBeLessThan(md.indexOf('## controller'));
  });
});
