// `GET /api/v1/framework/upgrade-preflight?target=<version>` (seed 000 TC-113: "升级预检列出框架依赖者，仍有依赖时阻塞";
// decision 0349): which components of the current load (the Registry the Installer last published) would break if the
// framework moved to `target` — each one whose declared target framework range excludes it. `blocked` stays true
// while any remains. A read: authorized as listing SystemComponents, nothing written, nothing audited.
import { Effect, Option, Ref } from 'effect';
import type { FrameworkPreflight } from '../../api/http/framework.js';
import { frameworkPreflight } from '../../domain/extension/framework-preflight.js';
import { isVersion } from '../../domain/extension/version.js';
import { ExtensionRegistry } from '../extension/services.js';
import { apiError } from './errors.js';
import { Authorizer } from './services.js';

export interface FrameworkPreflightInput {
  readonly authorization?: string;
  readonly target?: string;
}

export const frameworkUpgradePreflightRequest = (input: FrameworkPreflightInput) =>
  Effect.gen(function* () {
    yield* Effect.flatMap(Authorizer, (a) =>
      a.authorize({
        verb: 'list',
        kind: 'SystemComponent',
        ...(input.authorization !== undefined ? { authorization: input.authorization } : {}),
      }),
    );
    const target = input.target;
    if (target === undefined || !isVersion(target))
      return yield* apiError(
        'invalid_parameter',
        'route',
        target === undefined
          ? 'target is required: the framework version to upgrade to (MAJOR.MINOR.PATCH)'
          : `target "${target}" is not a version (MAJOR.MINOR.PATCH[-pre])`,
      );
    // without the extension pipeline nothing is loaded: nothing can depend on the framework
    const registry = yield* Effect.serviceOption(ExtensionRegistry);
    const result = Option.isSome(registry) ? (yield* Ref.get(registry.value)).result : { components: [] };
    const answer: FrameworkPreflight = frameworkPreflight(result, target);
    return answer;
  });
