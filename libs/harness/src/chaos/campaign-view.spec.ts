import { unsettled } from './campaign-view';

describe('unsettled: why the run has not settled before the next fault', () => {
  const settled = { services: ['detector', 'controller'], readiness: [200, 200], open: [], machinesUp: 6, machines: 6, down: [], moved: true };

  it('is empty once every service is ready, no recovery open, every machine up and a step committed', () => {
    expect(unsettled(settled)).toBe('');
  });

  it('names each reason it is not', () => {
    expect(unsettled({ ...settled, readiness: [200, 503], open: ['t-1/v1/recovery'], machinesUp: 5, down: ['rollout-6'], moved: false })).toBe(
      'services controller not ready; recoveries open: t-1/v1/recovery; 5 of 6 machines up; down and not yet recovered: rollout-6; no step committed since the last fault',
    );
  });

  it('a machine killed and not yet found is unsettled even when replacements make up the count', () => {
    expect(unsettled({ ...settled, machinesUp: 7, down: ['rollout-6', 'rollout-8'] })).toBe('down and not yet recovered: rollout-6, rollout-8');
  });
});
