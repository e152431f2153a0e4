// Decision 0720: the server settings nsd's tables rely on for their upkeep, turned into start-up warnings (pure).
import { describe, expect, it } from 'vitest';
import { maintenanceWarnings } from '../src/adapter/postgresql/probe.js';

describe('maintenanceWarnings', () => {
  it('autovacuum and track_counts on: no warning', () => {
    expect(maintenanceWarnings({ autovacuum: 'on', trackCounts: 'on' })).toEqual([]);
  });

  it('autovacuum off: one warning naming it and what to do', () => {
    const w = maintenanceWarnings({ autovacuum: 'off', trackCounts: 'on' });
    expect(w).toHaveLength(1);
    expect(w[0]).toMatch(/^autovacuum is off .*turn autovacuum on, or VACUUM the service_control schema/);
  });

  it('track_counts off: one warning (autovacuum finds its work from the counts)', () => {
    const w = maintenanceWarnings({ autovacuum: 'on', trackCounts: 'off' });
    expect(w).toEqual([expect.stringMatching(/^track_counts is off/)]);
  });

  it('both off: both warnings', () => {
    expect(maintenanceWarnings({ autovacuum: 'off', trackCounts: 'off' })).toHaveLength(2);
  });
});
