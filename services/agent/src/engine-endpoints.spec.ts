import { agentConfigFromEnv } from './agent-config';
import { enginesFromEnv, listsEngines, parseEngineList } from './engine-endpoints';

describe('the engines a machine hosts (ROBUSTRL_INFERENCE_URL or ROBUSTRL_ENGINES)', () => {
  it('names several engines <machine>/<name>, each with its URL', () => {
    const engines = parseEngineList('node-7', 'tp0=http://10.0.0.7:8000, tp1=http://10.0.0.7:8001/');
    expect(engines).toEqual([
      { engineId: 'node-7/tp0', url: 'http://10.0.0.7:8000' },
      { engineId: 'node-7/tp1', url: 'http://10.0.0.7:8001' },
    ]);
    expect(listsEngines('node-7', engines)).toBe(true);
  });

  it('keeps the one engine of ROBUSTRL_INFERENCE_URL under the machine id, as before', () => {
    const one = enginesFromEnv('node-7', { ROBUSTRL_INFERENCE_URL: 'http://10.0.0.7:8000' });
    expect(one).toEqual([{ engineId: 'node-7', url: 'http://10.0.0.7:8000' }]);
    expect(listsEngines('node-7', one)).toBe(false);
    expect(enginesFromEnv('node-7', {})).toEqual([]);
  });

  it.each([
    ['', /no engine listed/],
    ['http://10.0.0.7:8000', /is not name=url/],
    ['a b=http://x:1', /is not name=url/],
    ['a=10.0.0.7:8000', /is not an http\(s\) URL/],
    ['a=', /no URL is not an http/],
    ['a=http://x:1,a=http://x:2', /engine 'a' listed twice/],
  ])('refuses %p', (list, message) => {
    expect(() => parseEngineList('m', list)).toThrow(message);
  });

  it('refuses more than 64 engines on a machine', () => {
    const list = Array.from({ length: 65 }, (_, i) => `e${i}=http://h:${8000 + i}`).join(',');
    expect(() => parseEngineList('m', list)).toThrow(/65 engines listed, at most 64/);
  });

  it('an agent refuses to start with both settings, or a bad list, naming the setting', () => {
    const base = { ROBUSTRL_JOB_ID: 'j', ROBUSTRL_MACHINE_ID: 'm', ROBUSTRL_ROLE: 'rollout' };
    expect(() => agentConfigFromEnv({ ...base, ROBUSTRL_ENGINES: 'a=http://h:1', ROBUSTRL_INFERENCE_URL: 'http://h:1' })).toThrow(
      /agent configuration is invalid: ROBUSTRL_ENGINES and ROBUSTRL_INFERENCE_URL: set one/,
    );
    expect(() => agentConfigFromEnv({ ...base, ROBUSTRL_ENGINES: 'a=h:1' })).toThrow(/agent configuration is invalid: ROBUSTRL_ENGINES: 'a=h:1'/);
    expect(agentConfigFromEnv({ ...base, ROBUSTRL_ENGINES: 'a=http://h:1,b=http://h:2' }).engines.map((e) => e.engineId)).toEqual(['m/a', 'm/b']);
  });
});
