import { unsettled } from './campaign-view';

describe('unsettled: why the run has not settled before the next fault', () => {
  const settled = { services: ['detector', 'controller'], readiness: [200, 200], open: [], machinesUp: 6, machines: 6, moved: true };

  it('is empty once every service is ready, no recovery open, every machine up and a step committed', () => {
    expect(unsettled(settled)).toBe('');
  });

  it('names each reason it is not', () => {
    expect(unsettled({ ...settled, readiness: [200, 503], open: ['t-1/v1/recovery'], machinesUp: 5, moved: false })).toBe(
      'services controller not ready; recoveries open: t-1/v1/recovery; 5 of 6 machines up; no step committed since the last fault',
    );
  });
});
