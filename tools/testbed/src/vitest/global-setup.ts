// Vitest globalSetup: one test bed per test run. Reuses a running one when HOMELAB_TESTBED_STATE (or the
// default state file) names a live test bed — as `npm test` does, so all projects share one — otherwise
// starts its own and stops it at teardown. A test bed that fails to start fails the run with the reason.
// global-setup-node.ts is the same with a node (`projectTestConfig(dir, { testbed: true, node: true })`): it reuses a
// running test bed only if that one has a node, and otherwise starts its own with one.
import { Effect, Exit, Scope } from 'effect';
import type { TestProject } from 'vitest/node';
import { defaultStateFile, isAlive, readState, type TestbedState } from '../state.js';
import { startTestbed } from '../testbed.js';

declare module 'vitest' {
  export interface ProvidedContext {
    homelabTestbed: TestbedState;
  }
}

let scope: Scope.CloseableScope | undefined;

export async function setupTestbed(project: TestProject, options: { readonly node: boolean }): Promise<void> {
  const running = await Effect.runPromise(Effect.either(readState(defaultStateFile())));
  if (running._tag === 'Right' && isAlive(running.right.pid) && (!options.node || running.right.node)) {
    project.provide('homelabTestbed', running.right);
    return;
  }
  scope = Effect.runSync(Scope.make());
  const state = await Effect.runPromise(
    startTestbed({ progress: (line) => process.stderr.write(`testbed: ${line}\n`), node: options.node }).pipe(
      Scope.extend(scope),
    ),
  );
  project.provide('homelabTestbed', state);
}

export const setup = (project: TestProject): Promise<void> => setupTestbed(project, { node: false });

export async function teardown(): Promise<void> {
  if (scope) await Effect.runPromise(Scope.close(scope, Exit.void));
}
