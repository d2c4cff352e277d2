import { recordingDatabaseUrl } from './recording-store';

describe('recordingDatabaseUrl', () => {
  const optionsOf = (url: string) => new URL(url).searchParams.get('options') ?? '';

  it('asks for synchronous commit, index lookups and generic plans whatever the server defaults', () => {
    const options = optionsOf(recordingDatabaseUrl('postgres://u:p@db:5432/robustrl'));
    expect(options.split(' -c ').map((o) => o.replace(/^-c /, ''))).toEqual([
      'synchronous_commit=on',
      'enable_seqscan=off',
      'plan_cache_mode=force_generic_plan',
    ]);
  });

  it('leaves a setting the URL already names as given, and keeps the rest of the URL', () => {
    const url = recordingDatabaseUrl('postgres://u:p@db:5432/robustrl?sslmode=require&options=-c%20synchronous_commit%3Doff%20-c%20plan_cache_mode%3Dauto');
    const parsed = new URL(url);
    expect(parsed.searchParams.get('sslmode')).toBe('require');
    expect(parsed.pathname).toBe('/robustrl');
    const options = optionsOf(url);
    expect(options).toContain('synchronous_commit=off');
    expect(options).not.toContain('synchronous_commit=on');
    expect(options).toContain('plan_cache_mode=auto');
    expect(options).not.toContain('force_generic_plan');
    expect(options).toContain('enable_seqscan=off');
  });
});
