// The framework-upgrade preflight's answer (seed 000 TC-113: "升级预检列出框架依赖者，仍有依赖时阻塞"; decision 0349):
// `GET /api/v1/framework/upgrade-preflight?target=<version>`.
import { Schema } from 'effect';

/** One component whose declared target framework range excludes the upgrade target. */
export const FrameworkDependent = Schema.Struct({
  component: Schema.String,
  extension: Schema.String,
  version: Schema.String,
  /** The declared target framework range. */
  framework: Schema.String,
  /** The component's phase in the current load (Active, Disabled or Pending). */
  phase: Schema.String,
});
export type FrameworkDependent = typeof FrameworkDependent.Type;

export const FrameworkPreflight = Schema.Struct({
  /** The running framework version. */
  current: Schema.String,
  target: Schema.String,
  /** True while any dependent remains: the upgrade must not proceed. */
  blocked: Schema.Boolean,
  dependents: Schema.Array(FrameworkDependent),
});
export type FrameworkPreflight = typeof FrameworkPreflight.Type;
