// `ControllerSet` (seed 000 C-20: "每个声明的控制器一个调和循环…连续失败达到阈值即判为不可用"; digest §6.12; decisions
// 0305, 0342): one reconcile loop per controller of every activated component, its code run in a sandboxed process
// (the `ExtensionSandboxes` port) that holds nothing but a client whose every call comes back here. Writes pass
// `WriteScope.Admit` (`admitExtensionWrite` against the Registry's scope for that controller) and are audited with the
// extension as actor, refusals included (TC-109); reads are limited to the groups the controller may write. The set
// follows the Registry: a controller whose component is no longer activated (disabled, uninstalled) is stopped, and
// one that appears is started. Consecutive failures per controller are counted; at the threshold its objects'
// health is projected `Unknown` (`projectedHealth`), nothing else's.
import { Context, Duration, Effect, Either, Fiber, Layer, Ref, Runtime, Schedule, type Scope } from 'effect';
import { ItemExponentialRateLimiter, KubeClient, type KubeObject, startController } from '@homelab/kube';
import {
  afterControllerRound,
  type ControllerRecord,
  CONTROLLER_FAILURE_THRESHOLD,
} from '../../domain/extension/controllers.js';
import type { ServedKind } from '../../domain/extension/registry.js';
import { admitExtensionWrite, type ExtensionWrite } from '../../domain/extension/write-scope.js';
import { Auditor } from '../control-plane/services.js';
import { ExtensionRegistry, type LoadedState } from './services.js';

/** One call of the extension's client. */
export type SandboxCall =
  | { readonly method: 'get'; readonly arg: unknown }
  | { readonly method: 'list'; readonly arg: unknown }
  | { readonly method: 'apply'; readonly arg: unknown }
  | { readonly method: 'applyStatus'; readonly arg: unknown }
  | { readonly method: 'delete'; readonly arg: unknown };

export interface SandboxHandle {
  readonly reconcile: (request: {
    readonly apiVersion: string;
    readonly kind: string;
    readonly namespace?: string;
    readonly name: string;
  }) => Promise<{ readonly state?: string; readonly requeueAfterMs?: number }>;
  readonly alive: () => boolean;
}

/** Starts a controller's code with only `onCall` as its reach (closing the scope stops it). */
export class ExtensionSandboxes extends Context.Tag('@homelab/kos-kernel/ExtensionSandboxes')<
  ExtensionSandboxes,
  {
    readonly start: (
      moduleText: string,
      onCall: (call: SandboxCall) => Promise<unknown>,
    ) => Effect.Effect<SandboxHandle, Error, Scope.Scope>;
  }
>() {}

/** The controllers' failure records (`<extension>/<controller>`), for the projection and the tests. */
export class ControllerHealth extends Context.Tag('@homelab/kos-kernel/ControllerHealth')<
  ControllerHealth,
  Ref.Ref<ReadonlyMap<string, ControllerRecord>>
>() {}

export const ControllerHealthLive = Layer.effect(
  ControllerHealth,
  Ref.make<ReadonlyMap<string, ControllerRecord>>(new Map()),
);

export class ExtensionCallRefused extends Error {
  constructor(
    readonly code: 'forbidden' | 'invalid_parameter',
    message: string,
  ) {
    super(message);
  }
}

interface Ref_ {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name?: string;
}

const groupOf = (apiVersion: string) => (apiVersion.includes('/') ? (apiVersion.split('/')[0] as string) : '');

const refOfArg = (arg: unknown): Ref_ => {
  const a = (arg ?? {}) as {
    apiVersion?: unknown;
    kind?: unknown;
    namespace?: unknown;
    name?: unknown;
    metadata?: { namespace?: unknown; name?: unknown };
  };
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const apiVersion = str(a.apiVersion);
  const kind = str(a.kind);
  if (apiVersion === undefined || kind === undefined)
    throw new ExtensionCallRefused('invalid_parameter', 'a call names apiVersion and kind');
  const namespace = str(a.namespace) ?? str(a.metadata?.namespace);
  const name = str(a.name) ?? str(a.metadata?.name);
  return {
    apiVersion,
    kind,
    ...(namespace !== undefined ? { namespace } : {}),
    ...(name !== undefined ? { name } : {}),
  };
};

/** The object to apply: the call's fields, with `name`/`namespace` given at the top level moved into metadata. */
const objectOf = (arg: unknown, ref: Ref_): KubeObject => {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { name, namespace, metadata, ...rest } = (arg ?? {}) as Record<string, unknown>;
  return {
    ...rest,
    apiVersion: ref.apiVersion,
    kind: ref.kind,
    metadata: {
      ...((metadata ?? {}) as object),
      name: ref.name ?? '',
      ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}),
    },
  } as KubeObject;
};

/**
 * The handler of one controller's client calls: every write through `admitExtensionWrite` and the audit trail
 * (actor `extension:<id>/<controller>`), reads only in the groups its scope may write.
 */
export const extensionCallHandler = (extension: string, controller: string) => (call: SandboxCall) =>
  Effect.gen(function* () {
    const client = yield* KubeClient;
    const auditor = yield* Auditor;
    const state = yield* Ref.get(yield* ExtensionRegistry);
    const ctx = state.registry.writeScopeOf(extension, controller);
    const actor = `extension:${extension}/${controller}`;
    const ref = yield* Effect.try({
      try: () => refOfArg(call.arg),
      catch: (e) => e as ExtensionCallRefused,
    });
    const group = groupOf(ref.apiVersion);
    const objectRef = {
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      name: ref.name ?? '',
      ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}),
    };
    if (call.method === 'get' || call.method === 'list') {
      const readable =
        ctx !== undefined &&
        (ctx.ownGroups.includes(group) ||
          ctx.scope.some(
            (e) =>
              e.group === group &&
              e.namespaces !== undefined &&
              ref.namespace !== undefined &&
              e.namespaces.includes(ref.namespace),
          ));
      if (!readable)
        return yield* Effect.fail(
          new ExtensionCallRefused(
            'forbidden',
            `read refused: extension ${extension} controller ${controller} may not read ${ref.apiVersion} ${ref.kind}`,
          ),
        );
      if (call.method === 'list')
        return (yield* client.list(
          {
            apiVersion: ref.apiVersion,
            kind: ref.kind,
            ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}),
          },
          { limit: 500 },
        )).items;
      return yield* client.get(objectRef).pipe(
        Effect.map((o): KubeObject | undefined => o),
        Effect.catchTag('NotFound', () => Effect.succeed(undefined)),
      );
    }
    // a write: which verb, on which resource
    const resource = yield* client.discovery.forObject(ref.apiVersion, ref.kind).pipe(
      Effect.map((r) => r.plural),
      Effect.catchAll(() => Effect.succeed(`${ref.kind.toLowerCase()}s`)),
    );
    let verb: ExtensionWrite['verb'];
    if (call.method === 'applyStatus') verb = 'status';
    else if (call.method === 'delete') verb = 'delete';
    else {
      const exists = yield* client.get(objectRef).pipe(
        Effect.as(true),
        Effect.catchAll(() => Effect.succeed(false)),
      );
      verb = exists ? 'update' : 'create';
    }
    const write: ExtensionWrite = {
      extension,
      controller,
      group,
      resource,
      name: ref.name ?? '',
      verb,
      ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}),
    };
    const decided =
      ctx === undefined
        ? Either.left({
            message: `write rejected: extension ${extension} controller ${controller} is not active`,
          })
        : admitExtensionWrite(ctx, write);
    const auditVerb = verb === 'status' ? 'update' : verb;
    if (Either.isLeft(decided)) {
      yield* auditor.record({
        actor,
        verb: auditVerb,
        object: objectRef,
        outcome: 'rejected',
        code: 'forbidden',
        message: decided.left.message,
      });
      return yield* Effect.fail(new ExtensionCallRefused('forbidden', decided.left.message));
    }
    const fieldManager = `kos-extension-${extension}`;
    const done =
      verb === 'delete'
        ? client.delete(objectRef).pipe(Effect.as(undefined as unknown))
        : client
            .apply(objectOf(call.arg, ref), {
              fieldManager,
              force: true,
              ...(verb === 'status' ? { subresource: 'status' as const } : {}),
            })
            .pipe(Effect.map((o): unknown => o));
    const result = yield* Effect.either(done);
    yield* auditor.record({
      actor,
      verb: auditVerb,
      object: objectRef,
      outcome: Either.isRight(result) ? 'succeeded' : 'failed',
      ...(Either.isLeft(result) ? { message: String((result.left as { message?: string }).message ?? '') } : {}),
    });
    if (Either.isLeft(result)) return yield* Effect.fail(result.left);
    return result.right;
  });

interface Wanted {
  readonly key: string;
  readonly extension: string;
  readonly controller: string;
  readonly kind: ServedKind;
  readonly moduleText: string;
}

/** The controllers the Registry has activated, with their module text (absent module = not started). */
const wanted = (state: LoadedState): ReadonlyArray<Wanted> =>
  state.registry.contributions('controllers').flatMap((c) => {
    const kind = state.registry.kinds.find((k) => k.source.extension === c.source.extension && k.kind === c.kind);
    const moduleText = state.modules?.get(c.source.component)?.[c.module];
    if (kind === undefined || moduleText === undefined) return [];
    return [
      {
        key: `${c.source.extension}/${c.name}@${c.source.component}`,
        extension: c.source.extension,
        controller: c.name,
        kind,
        moduleText,
      },
    ];
  });

/** One controller: its sandbox and its reconcile loop over its kind, until interrupted. */
const runOne = (w: Wanted) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<KubeClient | Auditor | ExtensionRegistry>();
    const handler = extensionCallHandler(w.extension, w.controller);
    const sandboxes = yield* ExtensionSandboxes;
    const health = yield* ControllerHealth;
    const recordKey = `${w.extension}/${w.controller}`;
    const manages = `${w.kind.group}/${w.kind.kind}`;
    const record = (outcome: 'succeeded' | 'failed') =>
      Ref.update(health, (m) => {
        const prev = m.get(recordKey) ?? { key: recordKey, manages, consecutiveFailures: 0 };
        return new Map(m).set(recordKey, afterControllerRound(prev, outcome));
      });
    // the sandbox gets {code, message} of a failure, never a stack or a wrapped fiber failure
    const onCall = (call: SandboxCall) =>
      Runtime.runPromise(runtime)(Effect.either(handler(call))).then((r) => {
        if (Either.isRight(r)) return r.right;
        const e = r.left as { code?: unknown; _tag?: unknown; message?: unknown };
        throw {
          code: typeof e.code === 'string' ? e.code : typeof e._tag === 'string' ? e._tag : 'internal',
          message: typeof e.message === 'string' ? e.message : String(e),
        };
      });
    let sandbox = yield* sandboxes.start(w.moduleText, onCall);
    const apiVersion = `${w.kind.group}/${w.kind.version}`;
    yield* startController<KubeObject, Error, Scope.Scope>({
      name: `ext-${w.extension}-${w.controller}`,
      for: { apiVersion, kind: w.kind.kind },
      rateLimiter: new ItemExponentialRateLimiter<string>(200, 30_000),
      reconcile: (request) =>
        Effect.gen(function* () {
          if (!sandbox.alive()) sandbox = yield* sandboxes.start(w.moduleText, onCall); // crashed: restart
          const out = yield* Effect.tryPromise({
            try: () =>
              sandbox.reconcile({
                apiVersion,
                kind: w.kind.kind,
                name: request.name,
                ...(request.namespace !== undefined ? { namespace: request.namespace } : {}),
              }),
            catch: (e) => (e instanceof Error ? e : new Error(String(e))),
          }).pipe(Effect.tapError(() => record('failed')));
          yield* record('succeeded');
          return out.requeueAfterMs !== undefined ? { requeueAfter: Duration.millis(out.requeueAfterMs) } : {};
        }),
    });
    return yield* Effect.never;
  });

/**
 * Keep the running controllers equal to the Registry's activated ones (checked every `intervalMs`). Runs until
 * interrupted; each controller's scope closes with it (its process is killed).
 */
export const runControllerSet = (intervalMs = 500) =>
  Effect.gen(function* () {
    const registry = yield* ExtensionRegistry;
    const running = new Map<string, Fiber.RuntimeFiber<never, unknown>>();
    yield* Effect.addFinalizer(() => Effect.forEach([...running.values()], Fiber.interrupt, { discard: true }));
    const sync = Effect.gen(function* () {
      const want = wanted(yield* Ref.get(registry));
      const keys = new Set(want.map((w) => w.key));
      for (const [key, fiber] of running)
        if (!keys.has(key) || fiber.unsafePoll() !== null) {
          yield* Fiber.interrupt(fiber);
          running.delete(key);
        }
      for (const w of want)
        if (!running.has(w.key))
          running.set(
            w.key,
            yield* Effect.forkDaemon(
              Effect.scoped(runOne(w)).pipe(Effect.tapErrorCause((c) => Effect.logWarning(`controller ${w.key}`, c))),
            ),
          );
    });
    yield* sync.pipe(Effect.repeat(Schedule.spaced(Duration.millis(intervalMs))));
  });

export const CONTROLLER_SET_THRESHOLD = CONTROLLER_FAILURE_THRESHOLD;
