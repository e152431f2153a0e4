// Running one parsed command: guards first, then the layers it needs (the Kubernetes adapter is imported only by
// the commands that talk to a cluster), progress on stderr, one JSON result on stdout, an exit code.
import { mkdirSync, readFileSync } from 'node:fs';
import * as ceremony from '@homelab/deployment-ceremony';
import {
  type ApplyOutput,
  checkKubeconfigPrivate,
  encodeHead,
  installHead,
  LockedManifest,
  parsePreflightRecord,
  readHeadOption,
  rollbackHead,
  upgradeHead,
  type HeadRef,
  type RetirementCommand,
  type TargetIdentity,
  type KubernetesCluster,
  type OperatorHost,
  type ReceiptStore,
  type ClientMode,
} from '@homelab/deployment-ceremony';
import { FileReceiptStoreLive, createExclusiveFile } from '@homelab/deployment-ceremony/filesystem';
import { callerUid, OperatorHostLive, statKubeconfig } from '@homelab/deployment-ceremony/host';
import { Cause, Data, Effect, Exit, Layer, Logger, LogLevel, Option, Schema } from 'effect';
import type { Transport } from '@homelab/deployment-ceremony/kubernetes';
import type { Parsed } from './args.js';

export const EXIT = { ok: 0, refused: 1, usage: 2, unavailable: 3, incompatible: 4 } as const;

export interface Io {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/**
 * What only a test's own entry point passes (decision 0253): the shipped `main.ts` never does, and no environment
 * variable or flag reaches it, so the shipped binary cannot be made to crash itself.
 */
export interface TestHooks {
  readonly wrapTransport?: (t: Transport) => Transport;
}

type Services = KubernetesCluster | ReceiptStore | OperatorHost;

/** Progress lines (the use cases log one per target) go to stderr. */
const progressLogger = (io: Io) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message, logLevel }) => {
      const text = (Array.isArray(message) ? message : [message]).map(String).join(' ');
      io.err(`${logLevel.label === 'INFO' ? '·' : logLevel.label} ${text}`);
    }),
  );

const readJson = (path: string, what: string) =>
  Effect.try({
    try: () => JSON.parse(readFileSync(path, 'utf8')) as unknown,
    catch: (e) => new CliInputError({ message: `${what} ${path}: ${(e as Error).message}` }),
  });

/** A file named on the command line cannot be read or is not what it should be. */
export class CliInputError extends Data.TaggedError('CliInputError')<{ readonly message: string }> {}

const loadManifest = (path: string) =>
  Effect.flatMap(readJson(path, 'manifest'), (json) =>
    Schema.decodeUnknown(LockedManifest)(json).pipe(
      Effect.mapError((e) => new CliInputError({ message: `manifest ${path}: ${e.message}` })),
    ),
  );

/** The owner-private guard before the kubeconfig is read at all. */
const guardKubeconfig = (path: string) =>
  Effect.flatMap(statKubeconfig(path), ({ stat }) => checkKubeconfigPrivate(path, stat, callerUid()));

/** Commands other than `retire apply` write no receipt: their store refuses, typed, if ever asked. */
const NoReceiptStore = Layer.succeed(
  ceremony.ReceiptStore,
  ceremony.ReceiptStore.of({
    createExclusive: (key) =>
      Effect.fail(
        new ceremony.ReceiptStoreFailed({
          code: 'RECEIPT_STORE_FAILED',
          key,
          message: 'this command writes no receipt',
        }),
      ),
    read: (key) =>
      Effect.fail(
        new ceremony.ReceiptStoreFailed({
          code: 'RECEIPT_STORE_FAILED',
          key,
          message: 'this command reads no receipt',
        }),
      ),
  }),
);

const clusterLayer = (hooks: TestHooks, kubeconfig: string, head: HeadRef, mode: ClientMode, receipts?: string) =>
  Effect.gen(function* () {
    yield* guardKubeconfig(kubeconfig);
    const { clusterLayer } = yield* Effect.promise(() => import('./cluster.js'));
    return Layer.mergeAll(
      clusterLayer(kubeconfig, head, mode, hooks.wrapTransport),
      receipts === undefined ? NoReceiptStore : FileReceiptStoreLive(receipts),
      OperatorHostLive(kubeconfig),
    );
  });

const commandOf = (
  p: Extract<Parsed, { _tag: 'retire-preflight' | 'retire-apply' }>,
  lock: LockedManifest['lock'],
): RetirementCommand => ({
  operation: 'cluster.deployment.retirement',
  head: p.head,
  clusterUid: p.clusterUid,
  lock,
  expectedHead: p.expected,
  targets: p.targets.map((t): TargetIdentity => ({
    group: t.group,
    version: t.version,
    kind: t.kind,
    namespace: t.namespace,
    name: t.name,
  })),
});

const ensureDir = (dir: string) =>
  Effect.try({
    try: () => void mkdirSync(dir, { recursive: true, mode: 0o700 }),
    catch: (e) => new CliInputError({ message: `${dir}: ${(e as Error).message}` }),
  });

/** The program of one command: its JSON result (or a typed failure). */
const program = (p: Exclude<Parsed, { _tag: 'help' }>, io: Io, hooks: TestHooks) =>
  Effect.gen(function* () {
    switch (p._tag) {
      case 'receipt-audit': {
        const preflight =
          p.preflight === undefined
            ? undefined
            : yield* Effect.flatMap(
                Effect.try({
                  try: () => readFileSync(p.preflight ?? '', 'utf8'),
                  catch: (e) => new CliInputError({ message: String(e) }),
                }),
                (text) => parsePreflightRecord(text),
              );
        // Offline: only the receipt store is provided; no Kubernetes module is loaded.
        const audit = yield* ceremony
          .auditStoredReceipt(p.key, preflight)
          .pipe(Effect.provide(FileReceiptStoreLive(p.receipts)));
        io.err(`${audit.verdict === 'compatible' ? '✓' : '✗'} receipt ${p.key}: ${audit.verdict}`);
        for (const c of audit.checks) if (!c.ok) io.err(`  ✗ ${c.check}${c.detail ? `: ${c.detail}` : ''}`);
        return { result: audit, exit: audit.verdict === 'compatible' ? EXIT.ok : EXIT.incompatible };
      }
      case 'head-show': {
        const layer = yield* clusterLayer(hooks, p.kubeconfig, p.head, 'retirement');
        const shown = yield* Effect.gen(function* () {
          const { KubernetesCluster } = ceremony;
          const cluster = yield* KubernetesCluster;
          const head = yield* readHeadOption(p.head);
          return {
            operation: 'head.show',
            clusterUid: yield* cluster.clusterUid,
            head: Option.match(head, {
              onNone: () => null,
              onSome: (h) => ({ resourceVersion: h.resourceVersion, storedSchema: h.storedSchema, ...h.head }),
            }),
          };
        }).pipe(Effect.provide(layer));
        return { result: shown, exit: EXIT.ok };
      }
      case 'install':
      case 'upgrade':
      case 'rollback': {
        const manifest = yield* loadManifest(p.manifest);
        const layer = yield* clusterLayer(hooks, p.kubeconfig, p.head, 'transition');
        const input = {
          head: p.head,
          manifest,
          clusterUid: p.clusterUid,
          ...(p.expected === undefined ? {} : { expectedHead: p.expected }),
          ...(p.createNamespace === true ? { createNamespace: true } : {}),
        };
        if (p.dryRun) {
          const next = yield* Effect.gen(function* () {
            yield* ceremony.verifyEnvironment(manifest, p.clusterUid);
            const current = yield* readHeadOption(p.head);
            if (p._tag === 'install') {
              if (Option.isSome(current))
                return yield* new ceremony.HeadRejected({ code: 'HEAD_EXISTS', message: 'a Head exists; use upgrade' });
              return yield* installHead(manifest, p.head);
            }
            if (Option.isNone(current))
              return yield* new ceremony.HeadRejected({
                code: 'HEAD_NOT_FOUND',
                message: `no Head ${p.head.namespace}/${p.head.name}`,
              });
            if (p.expected !== undefined) {
              yield* ceremony.checkExpectedHead(
                ceremony.headVersion(current.value.head, current.value.resourceVersion),
                p.expected,
              );
            }
            return yield* (p._tag === 'upgrade' ? upgradeHead : rollbackHead)(current.value.head, manifest, p.head);
          }).pipe(Effect.provide(layer));
          yield* encodeHead(next);
          for (const o of next.inventory)
            io.err(
              `· would apply ${o.group === '' ? '' : `${o.group}/`}${o.version} ${o.kind} ${o.namespace ?? ''}/${o.name}`,
            );
          return {
            result: {
              operation: p._tag,
              dryRun: true,
              next: {
                generation: next.generation,
                transition: next.transition,
                release: next.release,
                inventory: next.inventory,
              },
            },
            exit: EXIT.ok,
          };
        }
        const observed =
          p._tag === 'install'
            ? { ...(yield* ceremony.install(input).pipe(Effect.provide(layer))), path: 'applied' as const }
            : yield* ceremony[p._tag](input).pipe(Effect.provide(layer));
        io.err(
          `✓ ${p._tag} (${observed.path}): Head ${p.head.namespace}/${p.head.name} generation ${observed.head.generation} (${observed.head.inventory.length} objects)`,
        );
        return {
          result: {
            operation: p._tag,
            path: observed.path,
            head: {
              generation: observed.head.generation,
              resourceVersion: observed.resourceVersion,
              transition: observed.head.transition,
              release: observed.head.release,
            },
            inventory: observed.head.inventory.length,
          },
          exit: EXIT.ok,
        };
      }
      case 'retire-abandon': {
        const layer = yield* clusterLayer(
          hooks,
          p.kubeconfig,
          p.head,
          'retirement',
          p.apply === undefined ? undefined : p.apply.receipts,
        );
        if (p.apply === undefined) {
          const preview = yield* ceremony
            .previewAbandon({ head: p.head, clusterUid: p.clusterUid })
            .pipe(Effect.provide(layer));
          io.err(
            `· Head ${p.head.namespace}/${p.head.name} generation ${preview.head.head.generation} (resourceVersion ${preview.head.resourceVersion}) is applying retirement intent ${preview.intentDigest}`,
          );
          io.err(
            `· an abandon would leave ${preview.inventoryAfter.length} objects in the inventory; nothing was changed`,
          );
          return {
            result: {
              operation: 'cluster.deployment.retirement.abandon',
              dryRun: true,
              head: { generation: preview.head.head.generation, resourceVersion: preview.head.resourceVersion },
              intentDigest: preview.intentDigest,
              intent: preview.intent,
              targets: preview.targets.map((t) => ({ identity: t.identity, uid: t.preconditions.uid, ...t.observed })),
              inventoryAfter: preview.inventoryAfter,
            },
            exit: EXIT.ok,
          };
        }
        yield* ensureDir(p.apply.receipts);
        const out = yield* ceremony
          .abandonRetirement({
            operation: 'cluster.deployment.retirement.abandon',
            head: p.head,
            clusterUid: p.clusterUid,
            expectedHead: p.apply.expected,
            intentDigest: p.apply.intentDigest as ceremony.Digest,
            reason: p.apply.reason,
          })
          .pipe(Effect.provide(layer));
        io.err(`✓ retire abandon (${out.path}): Head generation ${out.head.head.generation}, receipt ${out.key}`);
        return {
          result: {
            operation: 'cluster.deployment.retirement.abandon',
            path: out.path,
            receiptKey: out.key,
            receiptFile: `${p.apply.receipts}/${out.key}`,
            receiptDigest: out.receiptDigest,
            head: { generation: out.head.head.generation, resourceVersion: out.head.resourceVersion },
            inventory: out.head.head.inventory.length,
            deleted: 0,
          },
          exit: EXIT.ok,
        };
      }
      case 'retire-preflight': {
        const manifest = yield* loadManifest(p.manifest);
        const layer = yield* clusterLayer(hooks, p.kubeconfig, p.head, 'retirement');
        const out = yield* ceremony
          .preflightRetirement({ command: commandOf(p, manifest.lock), manifest })
          .pipe(Effect.provide(layer));
        yield* ensureDir(p.out);
        const file = `preflight-${out.digest.slice('sha256:'.length)}.json`;
        yield* createExclusiveFile(p.out, file, out.bytes).pipe(Effect.catchTag('ReceiptExists', () => Effect.void));
        io.err(`✓ preflight ${out.digest}: ${out.record.targets.length} target(s) bound; nothing was changed`);
        return {
          result: {
            operation: 'cluster.deployment.retirement.preflight',
            preflightDigest: out.digest,
            file: `${p.out}/${file}`,
            targets: out.record.targets.map((t) => ({
              identity: t.identity,
              plural: t.plural,
              preconditions: t.preconditions,
            })),
            survivorRoles: out.record.survivorRoles,
          },
          exit: EXIT.ok,
        };
      }
      case 'retire-apply': {
        const manifest = yield* loadManifest(p.manifest);
        const text = yield* Effect.try({
          try: () => readFileSync(p.preflight, 'utf8'),
          catch: (e) => new CliInputError({ message: `preflight ${p.preflight}: ${(e as Error).message}` }),
        });
        const record = yield* parsePreflightRecord(text);
        yield* ensureDir(p.receipts);
        const layer = yield* clusterLayer(hooks, p.kubeconfig, p.head, 'retirement', p.receipts);
        const out: ApplyOutput = yield* ceremony
          .applyRetirement({ command: commandOf(p, manifest.lock), manifest, preflight: record })
          .pipe(Effect.provide(layer));
        io.err(`✓ retire apply (${out.path}): Head generation ${out.head.head.generation}, receipt ${out.key}`);
        return {
          result: {
            operation: 'cluster.deployment.retirement.apply',
            path: out.path,
            receiptKey: out.key,
            receiptFile: `${p.receipts}/${out.key}`,
            receiptDigest: out.receiptDigest,
            head: { generation: out.head.head.generation, resourceVersion: out.head.resourceVersion },
            targets: out.receipt.targets.map((t) => ({
              identity: t.identity,
              outcome: t.outcome,
              uid: t.preconditions.uid,
            })),
            crossResourceAtomicity: false,
          },
          exit: EXIT.ok,
        };
      }
    }
  });

const UNAVAILABLE = new Set(['ClusterRequestFailed', 'ReceiptStoreFailed', 'CliInputError']);

/** Run a parsed command; returns the exit code. */
export const run = async (p: Exclude<Parsed, { _tag: 'help' }>, io: Io, hooks: TestHooks = {}): Promise<number> => {
  const exit = await Effect.runPromiseExit(
    (program(p, io, hooks) as Effect.Effect<{ result: unknown; exit: number }, unknown, Services>).pipe(
      Effect.provide(progressLogger(io)),
      Effect.provide(Logger.minimumLogLevel(LogLevel.Info)),
    ) as Effect.Effect<{ result: unknown; exit: number }, unknown>,
  );
  if (Exit.isSuccess(exit)) {
    io.out(JSON.stringify({ ok: true, ...(exit.value.result as object) }));
    return exit.value.exit;
  }
  const failure = Cause.failureOption(exit.cause);
  if (Option.isNone(failure)) {
    io.err(`✗ internal error: ${Cause.pretty(exit.cause)}`);
    io.out(JSON.stringify({ ok: false, error: { _tag: 'Defect', message: Cause.pretty(exit.cause) } }));
    return EXIT.unavailable;
  }
  const e = failure.value as { _tag?: string; code?: string; check?: string; target?: unknown; message?: string };
  const error = {
    _tag: e._tag ?? 'Error',
    ...(e.code === undefined ? {} : { code: e.code }),
    ...(e.check === undefined ? {} : { check: e.check }),
    ...(e.target === undefined ? {} : { target: e.target }),
    message: e.message ?? String(e),
  };
  io.err(`✗ ${error.code ?? error._tag}${error.check ? ` [${error.check}]` : ''}: ${error.message}`);
  io.out(JSON.stringify({ ok: false, error }));
  return UNAVAILABLE.has(error._tag) ? EXIT.unavailable : EXIT.refused;
};
