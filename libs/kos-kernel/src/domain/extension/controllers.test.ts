// TC-6 (second half, pure): one failing controller affects only the objects it manages.
import { describe, expect, it } from 'vitest';
import {
  afterControllerRound,
  CONTROLLER_FAILURE_THRESHOLD,
  type ControllerRecord,
  isControllerUnavailable,
  projectedHealth,
} from './controllers.js';

const run = (r: ControllerRecord, outcomes: ReadonlyArray<'succeeded' | 'failed'>) =>
  outcomes.reduce(afterControllerRound, r);

describe('TC-6: one failing controller affects only its own objects', () => {
  it('TC-6: the threshold counts consecutive failures; a success resets it', () => {
    const r: ControllerRecord = { key: 'notes/indexer', manages: 'notes.example.org/Note', consecutiveFailures: 0 };
    expect(CONTROLLER_FAILURE_THRESHOLD).toBe(5);
    expect(isControllerUnavailable(run(r, ['failed', 'failed', 'failed', 'failed']))).toBe(false);
    expect(isControllerUnavailable(run(r, ['failed', 'failed', 'failed', 'failed', 'failed']))).toBe(true);
    expect(isControllerUnavailable(run(r, ['failed', 'failed', 'failed', 'failed', 'succeeded', 'failed']))).toBe(
      false,
    );
  });

  it('TC-6: objects of the failing controller’s kind are Unknown; other extensions’ and kernel objects keep their own state', () => {
    const failing = run({ key: 'notes/indexer', manages: 'notes.example.org/Note', consecutiveFailures: 0 }, [
      'failed',
      'failed',
      'failed',
      'failed',
      'failed',
    ]);
    const healthy: ControllerRecord = { key: 'acme/sync', manages: 'acme.example/Item', consecutiveFailures: 0 };
    const controllers = [failing, healthy];
    expect(projectedHealth({ group: 'notes.example.org', kind: 'Note', health: 'Healthy' }, controllers)).toBe(
      'Unknown',
    );
    expect(projectedHealth({ group: 'acme.example', kind: 'Item', health: 'Degraded' }, controllers)).toBe('Degraded');
    expect(projectedHealth({ group: 'kos.tsic.top', kind: 'Application', health: 'Healthy' }, controllers)).toBe(
      'Healthy',
    );
  });
});
