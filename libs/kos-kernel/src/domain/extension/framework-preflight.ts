// The framework-upgrade preflight as the control plane answers it (seed 000 TC-113; decisions 0302, 0349). Pure: the
// components of the current load whose declared target framework range excludes `target` — activated, disabled
// (they come back on re-enable) and pending ones (they activate once their dependencies are met) — each with its
// extension, version and range. Rejected and adopted components load nothing and are not dependents.
import type { FrameworkDependent, FrameworkPreflight } from '../../api/http/framework.js';
import type { LoadResult } from './load.js';
import { KOS_FRAMEWORK_VERSION, satisfies } from './version.js';

export const frameworkDependents = (result: LoadResult, target: string): ReadonlyArray<FrameworkDependent> =>
  result.components.flatMap((c) => {
    const o = c.outcome;
    if (o._tag !== 'Active' && o._tag !== 'Disabled' && o._tag !== 'Pending') return [];
    const h = o.declaration.header;
    return satisfies(target, h.framework)
      ? []
      : [{ component: c.name, extension: h.id, version: h.version, framework: h.framework, phase: o._tag }];
  });

export const frameworkPreflight = (
  result: LoadResult,
  target: string,
  current: string = KOS_FRAMEWORK_VERSION,
): FrameworkPreflight => {
  const dependents = frameworkDependents(result, target);
  return { current, target, blocked: dependents.length > 0, dependents };
};
