import { serviceConfigFromEnv } from './service-config';

describe('serviceConfigFromEnv', () => {
  it('binds HTTP on loopback unless ROBUSTRL_HTTP_HOST names another address, and refuses what cannot be bound', () => {
    // Off loopback the API needs tokens (http-auth.spec.ts); these are the operator's.
    const guarded = { ROBUSTRL_HTTP_TOKENS: 'operator-token-0123456789' };
    expect(serviceConfigFromEnv('detector', 8081, {}).httpHost).toBe('127.0.0.1');
    expect(serviceConfigFromEnv('detector', 8081, { ...guarded, ROBUSTRL_HTTP_HOST: '0.0.0.0' }).httpHost).toBe('0.0.0.0');
    expect(serviceConfigFromEnv('detector', 8081, { ...guarded, ROBUSTRL_HTTP_HOST: '::' }).httpHost).toBe('::');
    expect(serviceConfigFromEnv('detector', 8081, { ...guarded, ROBUSTRL_HTTP_HOST: 'robustrl-detector-0.robustrl-detector' }).httpHost).toBe(
      'robustrl-detector-0.robustrl-detector',
    );
    expect(() => serviceConfigFromEnv('detector', 8081, { ROBUSTRL_HTTP_HOST: 'http://0.0.0.0' })).toThrow(/ROBUSTRL_HTTP_HOST/);
    expect(() => serviceConfigFromEnv('detector', 8081, { ROBUSTRL_HTTP_HOST: '0.0.0.0:8081' })).toThrow(/ROBUSTRL_HTTP_HOST/);
  });

  it('reads the port, `off` for no HTTP, and refuses a bad one', () => {
    expect(serviceConfigFromEnv('detector', 8081, {}).httpPort).toBe(8081);
    expect(serviceConfigFromEnv('detector', 8081, { ROBUSTRL_HTTP_PORT: 'off' }).httpPort).toBeNull();
    expect(() => serviceConfigFromEnv('detector', 8081, { ROBUSTRL_HTTP_PORT: '70000' })).toThrow(/ROBUSTRL_HTTP_PORT/);
  });
});
