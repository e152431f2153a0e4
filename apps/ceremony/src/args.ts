// Command-line parsing (pure): argv → one command with its options, or a usage error with the reason.
import { Data, Either } from 'effect';

export class UsageError extends Data.TaggedError('UsageError')<{ readonly message: string }> {}

export interface TargetArg {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
}

export interface HeadArg {
  readonly namespace: string;
  readonly name: string;
}

interface ClusterArgs {
  readonly kubeconfig: string;
  readonly head: HeadArg;
  readonly manifest: string;
  readonly clusterUid: string;
}

export type Parsed =
  | { readonly _tag: 'help'; readonly topic?: string }
  | ({
      readonly _tag: 'install' | 'upgrade' | 'rollback';
      readonly dryRun: boolean;
      readonly expected?: { readonly generation: number; readonly resourceVersion: string };
      /** install only: create the Head's namespace when it is missing. */
      readonly createNamespace?: boolean;
    } & ClusterArgs)
  | {
      readonly _tag: 'retire-abandon';
      readonly kubeconfig: string;
      readonly head: HeadArg;
      readonly clusterUid: string;
      /** The preview: show the stuck intent and what each target is now; change nothing. */
      readonly dryRun: boolean;
      readonly apply?: {
        readonly expected: { readonly generation: number; readonly resourceVersion: string };
        readonly intentDigest: string;
        readonly reason: string;
        readonly receipts: string;
      };
    }
  | ({
      readonly _tag: 'retire-preflight';
      readonly targets: ReadonlyArray<TargetArg>;
      readonly expected: { readonly generation: number; readonly resourceVersion: string };
      readonly out: string;
    } & ClusterArgs)
  | ({
      readonly _tag: 'retire-apply';
      readonly targets: ReadonlyArray<TargetArg>;
      readonly expected: { readonly generation: number; readonly resourceVersion: string };
      readonly preflight: string;
      readonly receipts: string;
    } & ClusterArgs)
  | { readonly _tag: 'receipt-audit'; readonly receipts: string; readonly key: string; readonly preflight?: string }
  | { readonly _tag: 'head-show'; readonly kubeconfig: string; readonly head: HeadArg };

export const DEFAULT_HEAD: HeadArg = { namespace: 'qinglong-system', name: 'qinglong-deployment-head' };

const REPEATABLE = new Set(['target']);
const FLAGS = new Set(['dry-run', 'help', 'create-namespace']);

/** `--name value` / `--name=value` options and bare words. */
const split = (
  argv: ReadonlyArray<string>,
): Either.Either<{ words: Array<string>; opts: Map<string, Array<string>> }, UsageError> => {
  const words: Array<string> = [];
  const opts = new Map<string, Array<string>>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '-h') {
      opts.set('help', ['true']);
      continue;
    }
    if (!a.startsWith('--')) {
      words.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = a.slice(2, eq < 0 ? undefined : eq);
    let value: string;
    if (FLAGS.has(name)) value = 'true';
    else if (eq >= 0) value = a.slice(eq + 1);
    else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--'))
        return Either.left(new UsageError({ message: `--${name} needs a value` }));
      value = next;
      i++;
    }
    const list = opts.get(name) ?? [];
    if (list.length > 0 && !REPEATABLE.has(name))
      return Either.left(new UsageError({ message: `--${name} given twice` }));
    opts.set(name, [...list, value]);
  }
  return Either.right({ words, opts });
};

/** `[group/]version/Kind/namespace/name`; four parts = the core group. */
export const parseTarget = (s: string): Either.Either<TargetArg, UsageError> => {
  const parts = s.split('/');
  const bad = () =>
    Either.left(new UsageError({ message: `--target ${s}: expected [group/]version/Kind/namespace/name` }));
  if (parts.some((p) => p === '')) return bad();
  if (parts.length === 4) {
    const [version, kind, namespace, name] = parts as [string, string, string, string];
    return Either.right({ group: '', version, kind, namespace, name });
  }
  if (parts.length === 5) {
    const [group, version, kind, namespace, name] = parts as [string, string, string, string, string];
    return Either.right({ group, version, kind, namespace, name });
  }
  return bad();
};

const parseHead = (s: string | undefined): Either.Either<HeadArg, UsageError> => {
  if (s === undefined) return Either.right(DEFAULT_HEAD);
  const parts = s.split('/');
  return parts.length === 2 && parts.every((p) => p !== '')
    ? Either.right({ namespace: parts[0] as string, name: parts[1] as string })
    : Either.left(new UsageError({ message: `--head ${s}: expected namespace/name` }));
};

const ALLOWED: Record<string, ReadonlyArray<string>> = {
  install: ['kubeconfig', 'head', 'manifest', 'cluster-uid', 'dry-run', 'create-namespace'],
  upgrade: [
    'kubeconfig',
    'head',
    'manifest',
    'cluster-uid',
    'dry-run',
    'expected-generation',
    'expected-resource-version',
  ],
  rollback: [
    'kubeconfig',
    'head',
    'manifest',
    'cluster-uid',
    'dry-run',
    'expected-generation',
    'expected-resource-version',
  ],
  'retire-preflight': [
    'kubeconfig',
    'head',
    'manifest',
    'cluster-uid',
    'target',
    'expected-generation',
    'expected-resource-version',
    'out',
  ],
  'retire-apply': [
    'kubeconfig',
    'head',
    'manifest',
    'cluster-uid',
    'target',
    'expected-generation',
    'expected-resource-version',
    'preflight',
    'receipts',
  ],
  'retire-abandon': [
    'kubeconfig',
    'head',
    'cluster-uid',
    'dry-run',
    'expected-generation',
    'expected-resource-version',
    'intent-digest',
    'reason',
    'receipts',
  ],
  'receipt-audit': ['receipts', 'key', 'preflight'],
  'head-show': ['kubeconfig', 'head'],
};

export const parseArgs = (argv: ReadonlyArray<string>): Either.Either<Parsed, UsageError> =>
  Either.gen(function* () {
    const { words, opts } = yield* split(argv);
    const [w0, w1] = words;
    const help = opts.has('help');
    if (w0 === undefined || w0 === 'help') return { _tag: 'help' as const, ...(w1 === undefined ? {} : { topic: w1 }) };
    const tag =
      w0 === 'retire' && (w1 === 'preflight' || w1 === 'apply' || w1 === 'abandon')
        ? (`retire-${w1}` as const)
        : w0 === 'receipt' && w1 === 'audit'
          ? ('receipt-audit' as const)
          : w0 === 'head' && w1 === 'show'
            ? ('head-show' as const)
            : w0 === 'install' || w0 === 'upgrade' || w0 === 'rollback'
              ? w0
              : undefined;
    if (tag === undefined)
      return yield* Either.left(new UsageError({ message: `unknown command: ${words.join(' ')}` }));
    if (help) return { _tag: 'help' as const, topic: tag };
    const extraWords = words.length - (tag.includes('-') ? 2 : 1);
    if (extraWords > 0)
      return yield* Either.left(
        new UsageError({ message: `unexpected argument: ${words.slice(words.length - extraWords).join(' ')}` }),
      );
    for (const name of opts.keys()) {
      if (!(ALLOWED[tag] ?? []).includes(name))
        return yield* Either.left(
          new UsageError({ message: `--${name} is not an option of ${tag.replace('-', ' ')}` }),
        );
    }
    const one = (name: string) => opts.get(name)?.[0];
    const need = (name: string) => {
      const v = one(name);
      return v === undefined || v === ''
        ? Either.left(new UsageError({ message: `--${name} is required` }))
        : Either.right(v);
    };
    const expectedOpt = () => {
      const g = one('expected-generation');
      const rv = one('expected-resource-version');
      if (g === undefined && rv === undefined) return Either.right(undefined);
      if (g === undefined || rv === undefined) {
        return Either.left(
          new UsageError({ message: '--expected-generation and --expected-resource-version go together' }),
        );
      }
      if (!/^[1-9][0-9]*$/.test(g))
        return Either.left(new UsageError({ message: `--expected-generation ${g}: a positive integer` }));
      return Either.right({ generation: Number(g), resourceVersion: rv });
    };
    if (tag === 'receipt-audit') {
      const preflight = one('preflight');
      return {
        _tag: tag,
        receipts: yield* need('receipts'),
        key: yield* need('key'),
        ...(preflight === undefined ? {} : { preflight }),
      };
    }
    const kubeconfig = yield* need('kubeconfig');
    const head = yield* parseHead(one('head'));
    if (tag === 'head-show') return { _tag: tag, kubeconfig, head };
    if (tag === 'retire-abandon') {
      const clusterUid = yield* need('cluster-uid');
      const dryRun = opts.has('dry-run');
      if (dryRun) {
        const extra = ['expected-generation', 'expected-resource-version', 'intent-digest', 'reason', 'receipts'];
        const given = extra.find((o) => opts.has(o));
        if (given !== undefined)
          return yield* Either.left(new UsageError({ message: `--${given} is not used by the abandon preview` }));
        return { _tag: tag, kubeconfig, head, clusterUid, dryRun };
      }
      const expected = yield* expectedOpt();
      if (expected === undefined)
        return yield* Either.left(
          new UsageError({
            message: '--expected-generation and --expected-resource-version are required (run with --dry-run first)',
          }),
        );
      const intentDigest = yield* need('intent-digest');
      if (!/^sha256:[0-9a-f]{64}$/.test(intentDigest))
        return yield* Either.left(
          new UsageError({ message: `--intent-digest ${intentDigest}: expected sha256:<64 hex>` }),
        );
      const reason = yield* need('reason');
      if (reason.length > 1024)
        return yield* Either.left(new UsageError({ message: '--reason: at most 1024 characters' }));
      return {
        _tag: tag,
        kubeconfig,
        head,
        clusterUid,
        dryRun,
        apply: { expected, intentDigest, reason, receipts: yield* need('receipts') },
      };
    }
    const cluster: ClusterArgs = {
      kubeconfig,
      head,
      manifest: yield* need('manifest'),
      clusterUid: yield* need('cluster-uid'),
    };
    const expected = yield* expectedOpt();
    if (tag === 'install' || tag === 'upgrade' || tag === 'rollback') {
      if (tag === 'install' && expected !== undefined)
        return yield* Either.left(new UsageError({ message: 'install takes no expected Head' }));
      return {
        _tag: tag,
        ...cluster,
        dryRun: opts.has('dry-run'),
        ...(expected === undefined ? {} : { expected }),
        ...(tag === 'install' ? { createNamespace: opts.has('create-namespace') } : {}),
      };
    }
    const targets = yield* Either.all((opts.get('target') ?? []).map(parseTarget));
    if (targets.length === 0)
      return yield* Either.left(new UsageError({ message: 'at least one --target is required' }));
    if (expected === undefined)
      return yield* Either.left(
        new UsageError({ message: '--expected-generation and --expected-resource-version are required' }),
      );
    if (tag === 'retire-preflight') return { _tag: tag, ...cluster, targets, expected, out: yield* need('out') };
    return {
      _tag: tag,
      ...cluster,
      targets,
      expected,
      preflight: yield* need('preflight'),
      receipts: yield* need('receipts'),
    };
  });

export const USAGE = `ceremony — the QingLong Deployment Head and its fenced retirement ceremony (ADR-0435)

Usage:
  ceremony install   --kubeconfig FILE --manifest LOCKED.json --cluster-uid UID [--head NS/NAME] [--dry-run]
                     [--create-namespace]
  ceremony upgrade   --kubeconfig FILE --manifest LOCKED.json --cluster-uid UID [--head NS/NAME]
                     [--expected-generation N --expected-resource-version RV] [--dry-run]
  ceremony rollback  (same options as upgrade; the manifest is the one of Head.previous)
  ceremony retire preflight --kubeconfig FILE --manifest LOCKED.json --cluster-uid UID [--head NS/NAME]
                     --expected-generation N --expected-resource-version RV
                     --target [GROUP/]VERSION/KIND/NAMESPACE/NAME ... --out DIR
  ceremony retire apply     (the same options as the preflight, without --out) --preflight FILE --receipts DIR
  ceremony retire abandon   --kubeconfig FILE --cluster-uid UID [--head NS/NAME] --dry-run
  ceremony retire abandon   --kubeconfig FILE --cluster-uid UID [--head NS/NAME]
                     --expected-generation N --expected-resource-version RV --intent-digest DIGEST
                     --reason TEXT --receipts DIR
  ceremony receipt audit    --receipts DIR --key RECEIPT-FILE-NAME [--preflight FILE]
  ceremony head show        --kubeconfig FILE [--head NS/NAME]
  ceremony help [COMMAND] | COMMAND --help

  --kubeconfig   the only credentials read (KUBECONFIG and ~/.kube are never consulted); it must be a regular file
                 owned by you with mode 0600 or stricter, or nothing is sent.
  --head         the Head ConfigMap (default qinglong-system/qinglong-deployment-head).
  --cluster-uid  the UID of namespace kube-system recorded for this deployment (see \`head show\`).
  --target       repeat in the order of retirement; four parts mean the core group (v1/ConfigMap/ns/name).
  --create-namespace  install: create the Head's namespace when it does not exist (refused without it).
  --dry-run      install/upgrade/rollback: read the Head, check the transition and print the next Head; apply nothing.
                 retire abandon: show the stuck retirement intent, its digest and each target as it is now.
  An upgrade or rollback stores its intent in the Head before applying anything: after a crash or a lost answer,
  re-run the same command (it resumes, or reports already-committed); any other command is refused meanwhile.
  retire abandon: a retirement stuck applying (e.g. UID_REPLACED on resume) is closed without deleting anything:
                 the Head commits the inventory really there (targets found absent leave it) and an abandon
                 receipt is written; \`receipt audit\` verifies it (abandoned: true).
                 (The retirement's dry run is \`retire preflight\`: server-side dry-run DELETEs, no change.)

Output: progress per target on stderr; one JSON result on stdout.
Exit codes: 0 done; 1 refused, fail-closed (a typed reason: code, check, target); 2 usage error;
            3 the API server or the receipt directory could not be used (nothing was concluded; re-run the same
            command); 4 receipt audit verdict incompatible.
`;
