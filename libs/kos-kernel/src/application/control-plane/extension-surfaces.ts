// The pages and settings extensions contribute, through the control plane (seed 000 §6.12 Registry: "只回答已激活声明里
// 的贡献…页面按会话角色给出可见性判定"; C-23 settings; C-28 disable: "设置项消失且接口被拒…值保留"; TC-5, TC-7, TC-8,
// TC-110; decision 0345). `GET /api/v1/pages` lists the pages the caller's role sees, with their declared source and
// the actions that role may take; `GET /api/v1/settings[?node=]` projects the activated components' settings;
// `PUT /api/v1/settings/{id}` writes one value. A setting no activated component declares is `capability_missing`
// (the same answer as an unserved extension kind); its stored value stays where it is.
import { Clock, Effect, Either, Option, Ref, Schema } from 'effect';
import { SettingPut } from '../../api/http/extension-bodies.js';
import {
  isDeclarationRefusal,
  settingKeyOf,
  settingValueProblem,
  settingView,
  settingWriteRefusal,
  type SettingView,
} from '../../domain/extension/settings.js';
import { pagesView, type PageView } from '../../domain/extension/object-writes.js';
import { emptyLoad, ExtensionRegistry } from '../extension/services.js';
import { SettingValues } from '../extension/setting-values.js';
import { identityApiError } from '../identity/errors.js';
import { type ApiError, apiError, describeParseError } from './errors.js';
import { Auditor, Authorizer } from './services.js';

const registryNow = Effect.flatMap(Effect.serviceOption(ExtensionRegistry), (r) =>
  Option.isSome(r) ? Effect.map(Ref.get(r.value), (s) => s.registry) : Effect.succeed(emptyLoad.registry),
);

const settingValues = Effect.flatMap(Effect.serviceOption(SettingValues), (s) =>
  Option.isSome(s)
    ? Effect.succeed(s.value)
    : Effect.fail(apiError('capability_missing', 'route', 'this control plane keeps no setting values')),
);

const authorize = (authorization: string | undefined, verb: 'list' | 'get' | 'update') =>
  Effect.flatMap(Authorizer, (a) => a.authorize({ verb, ...(authorization !== undefined ? { authorization } : {}) }));

/** The audit records' reference of a setting (settings are not cluster objects; like accounts, identity.kos.tsic.top/v1). */
export const SETTING_API_VERSION = 'settings.kos.tsic.top/v1';

export interface PagesAnswer {
  readonly items: ReadonlyArray<PageView>;
}

/** The pages of activated components the caller's role sees (TC-5: nothing undeclared or not activated). */
export const listPages = (input: {
  readonly authorization?: string;
}): Effect.Effect<PagesAnswer, ApiError, Authorizer> =>
  Effect.gen(function* () {
    const principal = yield* authorize(input.authorization, 'list');
    return { items: pagesView(yield* registryNow, principal.role) };
  });

export interface SettingsAnswer {
  readonly items: ReadonlyArray<SettingView>;
}

/** The settings of activated components with their current values (C-23); `node` names the node of node items. */
export const listSettings = (input: {
  readonly authorization?: string;
  readonly node?: string;
}): Effect.Effect<SettingsAnswer, ApiError, Authorizer> =>
  Effect.gen(function* () {
    const principal = yield* authorize(input.authorization, 'get');
    const items = (yield* registryNow).contributions('settings');
    const store = Option.getOrUndefined(yield* Effect.serviceOption(SettingValues));
    const views: SettingView[] = [];
    for (const item of items) {
      const key = settingKeyOf(item, {
        account: principal.actor,
        ...(input.node !== undefined ? { node: input.node } : {}),
      });
      if ('problem' in key && item.scope === 'node' && input.node !== undefined && input.node !== '')
        return yield* apiError('invalid_parameter', 'route', key.problem);
      const stored =
        'key' in key && store !== undefined
          ? yield* store.get(key.key).pipe(Effect.mapError(identityApiError))
          : undefined;
      views.push(
        settingView(
          item,
          {
            account: principal.actor,
            role: principal.role,
            ...(item.scope === 'node' && input.node !== undefined ? { node: input.node } : {}),
          },
          stored,
        ),
      );
    }
    return { items: views };
  });

export interface SettingWritten {
  readonly accepted: true;
  readonly setting: SettingView;
}

/** Write one value (C-23): only a served, user-written, modifiable item; node items name their node; user items are the caller's. */
export const putSetting = (input: {
  readonly authorization?: string;
  readonly id: string;
  readonly body: unknown;
}): Effect.Effect<SettingWritten, ApiError, Authorizer | Auditor> => {
  const facts: { actor: string; extension?: string } = { actor: 'unknown' };
  const object = { apiVersion: SETTING_API_VERSION, kind: 'Setting', name: input.id };
  return Effect.gen(function* () {
    const principal = yield* authorize(input.authorization, 'update');
    facts.actor = principal.actor;
    const item = (yield* registryNow).contributions('settings').find((s) => s.id === input.id);
    if (item === undefined)
      return yield* apiError(
        'capability_missing',
        'route',
        `setting ${input.id} is not served: no activated component declares it (settings disappear while their component is disabled)`,
      );
    facts.extension = item.source.extension;
    const refusal = settingWriteRefusal(item, principal.role);
    if (refusal !== undefined)
      return yield* isDeclarationRefusal(item)
        ? apiError('invalid_field', 'validate', refusal, { causes: [{ field: 'value', message: refusal }] })
        : apiError('forbidden', 'authorize', `${principal.actor} (${principal.role}): ${refusal}`, {
            actor: principal.actor,
          });
    const decoded = Schema.decodeUnknownEither(SettingPut)(input.body, { onExcessProperty: 'error' });
    if (Either.isLeft(decoded))
      return yield* apiError(
        'invalid_field',
        'validate',
        `the body is {value, node?}: ${describeParseError(decoded.left)}`,
      );
    const b = decoded.right;
    const key = settingKeyOf(item, {
      account: principal.actor,
      ...(typeof b.node === 'string' ? { node: b.node } : {}),
    });
    if ('problem' in key)
      return yield* apiError('invalid_field', 'validate', key.problem, {
        causes: [{ field: 'node', message: key.problem }],
      });
    const problem = settingValueProblem(item, b.value);
    if (problem !== undefined)
      return yield* apiError('invalid_field', 'validate', problem, { causes: [{ field: 'value', message: problem }] });
    const store = yield* settingValues;
    const now = yield* Clock.currentTimeMillis;
    yield* store.set(key.key, b.value, principal.actor, now).pipe(Effect.mapError(identityApiError));
    return {
      accepted: true as const,
      setting: settingView(
        item,
        { account: principal.actor, role: principal.role, ...(typeof b.node === 'string' ? { node: b.node } : {}) },
        { found: true, value: b.value },
      ),
    };
  }).pipe(
    Effect.tap(() =>
      Effect.flatMap(Auditor, (a) =>
        a.record({
          actor: facts.actor,
          verb: 'update',
          outcome: 'accepted',
          object,
          ...(facts.extension !== undefined ? { extension: facts.extension } : {}),
        }),
      ),
    ),
    Effect.tapError((e) =>
      Effect.flatMap(Auditor, (a) =>
        a.record({
          actor: e.actor ?? facts.actor,
          verb: 'update',
          outcome: 'rejected',
          code: e.code,
          message: e.message,
          object,
          ...(facts.extension !== undefined ? { extension: facts.extension } : {}),
        }),
      ),
    ),
  );
};
