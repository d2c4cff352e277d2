import { busConfigFromEnv } from './bus-config';

describe('bus configuration from the environment', () => {
  const kafka = { KAFKA_BROKERS: '127.0.0.1:19092' };

  it('removes dead members of this host before joining unless ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS=off', () => {
    expect(busConfigFromEnv(kafka, 'robustrl-detector')).toMatchObject({ adapter: 'kafka', evictDeadMembers: true });
    expect(busConfigFromEnv({ ...kafka, ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS: 'on' }, 'robustrl-detector')).toMatchObject({ evictDeadMembers: true });
    expect(busConfigFromEnv({ ...kafka, ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS: 'off' }, 'robustrl-detector')).toMatchObject({ evictDeadMembers: false });
  });

  it('stops start-up on another value, naming the variable', () => {
    expect(() => busConfigFromEnv({ ...kafka, ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS: 'yes' }, 'robustrl-detector')).toThrow(/ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS/);
  });
});
