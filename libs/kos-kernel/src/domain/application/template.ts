// The built-in template engine (seed 000 §5.2; decision 0221). A template is a list of JSON documents in which a
// string may hold typed placeholders `{{app.name}}`, `{{app.namespace}}`, `{{config.<key>}}`, `{{volume.<name>}}`.
// A string that is exactly one placeholder takes the value's own type (an integer stays an integer); placeholders
// inside a longer string are interpolated as text. Rendering is a pure function of (app name, declared namespace,
// parsed config, volume claim names): no external calls, no randomness, and the same input gives the same bytes.
// Package rules (an invalid package is never rendered): no PersistentVolumeClaim, no storage class, no volume
// templates, nothing outside the declared namespace, no placeholder the package cannot resolve (a typo).
import { Either } from 'effect';
import { canonicalJson, digestOf } from './canonical.js';
import { type ConfigSchema, configSchemaProblems, type FieldProblem, type NormalizedConfig } from './config.js';

export interface Manifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace: string; readonly [k: string]: unknown };
  readonly [field: string]: unknown;
}

export interface RenderInput {
  readonly appName: string;
  readonly namespace: string;
  readonly config: NormalizedConfig;
  /** The claim (= Volume = PVC) name for every volume the template names. */
  readonly volumes: Readonly<Record<string, string>>;
}

export interface Rendered {
  /** The package-rendered objects, sorted by kind then name. */
  readonly objects: ReadonlyArray<Manifest>;
  /** The install hook Job, when the package declares one. */
  readonly installHook?: Manifest;
  /** The upgrade hook Job, when the package declares one (run once per upgrade; not part of the digest). */
  readonly upgradeHook?: Manifest;
  /** Digest of the canonical bytes of objects + hook (status.applied.renderDigest). */
  readonly digest: string;
}

/** Kinds a template may render (the scalable workloads first). */
export const TEMPLATE_KINDS: Readonly<Record<string, string>> = {
  Deployment: 'apps/v1',
  StatefulSet: 'apps/v1',
  Service: 'v1',
  ConfigMap: 'v1',
};
export const SCALABLE_KINDS: ReadonlyArray<string> = ['Deployment', 'StatefulSet', 'ReplicaSet'];

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;
const WHOLE = /^\{\{\s*([^{}]*?)\s*\}\}$/;
const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

type Resolved = { readonly _tag: 'value'; readonly value: unknown } | { readonly _tag: 'absent' };

const resolve = (
  expr: string,
  input: RenderInput,
  schema: ConfigSchema | undefined,
): Either.Either<Resolved, string> => {
  const m = /^(app|config|volume)\.([A-Za-z][A-Za-z0-9_-]*)(?:\s*\|\s*(string))?$/.exec(expr);
  if (m === null)
    return Either.left(
      `unknown placeholder {{${expr}}}: use app.name, app.namespace, config.<key> or volume.<name>, optionally | string`,
    );
  const [, root, key, filter] = m as unknown as [string, string, string, string | undefined];
  const done = (r: Either.Either<Resolved, string>): Either.Either<Resolved, string> =>
    filter === 'string'
      ? Either.map(r, (x) => (x._tag === 'value' ? { _tag: 'value', value: String(x.value) } : x))
      : r;
  return done(resolveKey(root, key, expr, input, schema));
};

const resolveKey = (
  root: string,
  key: string,
  expr: string,
  input: RenderInput,
  schema: ConfigSchema | undefined,
): Either.Either<Resolved, string> => {
  if (root === 'app') {
    if (key === 'name') return Either.right({ _tag: 'value', value: input.appName });
    if (key === 'namespace') return Either.right({ _tag: 'value', value: input.namespace });
    return Either.left(`unknown placeholder {{${expr}}}: app has only name and namespace`);
  }
  if (root === 'config') {
    if (schema?.fields[key] === undefined)
      return Either.left(`unknown placeholder {{${expr}}}: config key "${key}" is not declared by the config schema`);
    const v = input.config[key];
    return Either.right(v === undefined ? { _tag: 'absent' } : { _tag: 'value', value: v });
  }
  const claim = input.volumes[key];
  if (claim === undefined) return Either.left(`volume "${key}" has no claim name`);
  return Either.right({ _tag: 'value', value: claim });
};

class RenderFailure {
  constructor(readonly problem: FieldProblem) {}
}

const substitute = (value: unknown, path: string, input: RenderInput, schema: ConfigSchema | undefined): unknown => {
  if (typeof value === 'string') {
    const whole = WHOLE.exec(value);
    if (whole !== null) {
      const r = resolve(whole[1] as string, input, schema);
      if (Either.isLeft(r)) throw new RenderFailure({ field: path, message: r.left });
      return r.right._tag === 'absent' ? undefined : r.right.value;
    }
    return value.replace(PLACEHOLDER, (_, expr: string) => {
      const r = resolve(expr, input, schema);
      if (Either.isLeft(r)) throw new RenderFailure({ field: path, message: r.left });
      return r.right._tag === 'absent' ? '' : String(r.right.value);
    });
  }
  if (Array.isArray(value))
    return value.map((v, i) => substitute(v, `${path}[${i}]`, input, schema)).filter((v) => v !== undefined);
  if (isRecord(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const s = substitute(v, `${path}.${k}`, input, schema);
      if (s !== undefined) out[k] = s;
    }
    return out;
  }
  return value;
};

/** The volume names a template refers to (`{{volume.<name>}}`), sorted. */
export const templateVolumes = (definitionSpec: unknown): ReadonlyArray<string> => {
  const found = new Set<string>();
  const text = JSON.stringify([
    (definitionSpec as { template?: unknown })?.template,
    (definitionSpec as { hooks?: unknown })?.hooks,
  ]);
  for (const m of text.matchAll(/\{\{\s*volume\.([A-Za-z][A-Za-z0-9_-]*)(?:\s*\|\s*string)?\s*\}\}/g))
    found.add(m[1] as string);
  return [...found].sort();
};

/** Find keys anywhere in a document (storageClassName, volumeClaimTemplates). */
const findKey = (value: unknown, key: string, path: string): string | undefined => {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const f = findKey(value[i], key, `${path}[${i}]`);
      if (f !== undefined) return f;
    }
  } else if (isRecord(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (k === key) return `${path}.${k}`;
      const f = findKey(v, key, `${path}.${k}`);
      if (f !== undefined) return f;
    }
  }
  return undefined;
};

const documentProblems = (doc: unknown, path: string, allowed: Readonly<Record<string, string>>): FieldProblem[] => {
  if (!isRecord(doc)) return [{ field: path, message: 'a document must be an object' }];
  const out: FieldProblem[] = [];
  const kind = doc['kind'];
  if (kind === 'PersistentVolumeClaim')
    out.push({
      field: `${path}.kind`,
      message: 'a package must not render a PersistentVolumeClaim: volumes come only from Volume objects',
    });
  else if (typeof kind !== 'string' || allowed[kind] === undefined)
    out.push({ field: `${path}.kind`, message: `must be one of ${Object.keys(allowed).join(', ')}` });
  else if (doc['apiVersion'] !== allowed[kind])
    out.push({ field: `${path}.apiVersion`, message: `${kind} is ${allowed[kind]}` });
  const meta = doc['metadata'];
  if (!isRecord(meta) || typeof meta['name'] !== 'string' || meta['name'] === '')
    out.push({ field: `${path}.metadata.name`, message: 'required' });
  else if (meta['namespace'] !== undefined && meta['namespace'] !== '{{app.namespace}}')
    out.push({
      field: `${path}.metadata.namespace`,
      message: 'a package renders only into the declared namespace: omit it or use {{app.namespace}}',
    });
  const sc = findKey(doc, 'storageClassName', path);
  if (sc !== undefined) out.push({ field: sc, message: 'a package must not declare a storage class' });
  const vct = findKey(doc, 'volumeClaimTemplates', path);
  if (vct !== undefined) out.push({ field: vct, message: 'a package must not ship volume templates' });
  return out;
};

/** Invalid-package rules over `ApplicationDefinition.spec` (before any render). Empty = valid. */
export const packageProblems = (spec: unknown): ReadonlyArray<FieldProblem> => {
  if (!isRecord(spec)) return [{ field: 'spec', message: 'must be an object' }];
  const out: FieldProblem[] = [...configSchemaProblems(spec['config'])];
  const pkg = spec['package'];
  if (isRecord(pkg)) {
    for (const k of ['storageClass', 'storageClassName'])
      if (pkg[k] !== undefined)
        out.push({ field: `spec.package.${k}`, message: 'a package must not declare a storage class' });
    if (pkg['volumeTemplates'] !== undefined)
      out.push({ field: 'spec.package.volumeTemplates', message: 'a package must not ship volume templates' });
  }
  const template = spec['template'];
  const docs = isRecord(template) ? template['documents'] : undefined;
  if (!Array.isArray(docs) || docs.length === 0)
    out.push({ field: 'spec.template.documents', message: 'a template is {documents: [at least one object]}' });
  else docs.forEach((d, i) => out.push(...documentProblems(d, `spec.template.documents[${i}]`, TEMPLATE_KINDS)));
  const hooks = spec['hooks'];
  if (hooks !== undefined) {
    if (!isRecord(hooks)) out.push({ field: 'spec.hooks', message: 'must be {install?: <Job>, upgrade?: <Job>}' });
    else
      for (const [k, v] of Object.entries(hooks)) {
        if (k !== 'install' && k !== 'upgrade')
          out.push({ field: `spec.hooks.${k}`, message: 'only the install and upgrade hooks exist in this version' });
        else out.push(...documentProblems(v, `spec.hooks.${k}`, { Job: 'batch/v1' }));
      }
  }
  if (out.length > 0) return out;
  // Every placeholder must resolve: render once with a probe input built from the schema alone.
  const schema = spec['config'] as ConfigSchema | undefined;
  const probe: RenderInput = {
    appName: 'probe',
    namespace: 'probe',
    config: Object.fromEntries(
      Object.entries(schema?.fields ?? {}).map(([k, f]) => [
        k,
        f.default ?? (f.type === 'string' ? 'x' : f.type === 'boolean' ? true : 1),
      ]),
    ),
    volumes: Object.fromEntries(templateVolumes(spec).map((v) => [v, `probe-${v}`])),
  };
  const r = render(spec, probe, { skipPackageCheck: true });
  return Either.isLeft(r) ? r.left : [];
};

const sortObjects = (objects: ReadonlyArray<Manifest>): ReadonlyArray<Manifest> =>
  [...objects].sort((a, b) => {
    const ka = Object.keys(TEMPLATE_KINDS).indexOf(a.kind);
    const kb = Object.keys(TEMPLATE_KINDS).indexOf(b.kind);
    return ka !== kb ? ka - kb : a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
  });

/**
 * Render a definition for one app. Left = the field problems (package invalid, placeholder typo, or two documents
 * with the same kind and name). Everything lands in `input.namespace`.
 */
export const render = (
  definitionSpec: unknown,
  input: RenderInput,
  options: { readonly skipPackageCheck?: boolean } = {},
): Either.Either<Rendered, ReadonlyArray<FieldProblem>> => {
  if (options.skipPackageCheck !== true) {
    const problems = packageProblems(definitionSpec);
    if (problems.length > 0) return Either.left(problems);
  }
  const spec = definitionSpec as {
    template: { documents: unknown[] };
    hooks?: { install?: unknown; upgrade?: unknown };
    config?: ConfigSchema;
  };
  const place = (doc: unknown, path: string): Manifest => {
    const out = substitute(doc, path, input, spec.config) as Record<string, unknown>;
    const meta = (out['metadata'] ?? {}) as Record<string, unknown>;
    return { ...out, metadata: { ...meta, namespace: input.namespace } } as Manifest;
  };
  try {
    const objects = sortObjects(spec.template.documents.map((d, i) => place(d, `spec.template.documents[${i}]`)));
    const seen = new Set<string>();
    for (const o of objects) {
      const key = `${o.kind}/${o.metadata.name}`;
      if (seen.has(key))
        return Either.left([{ field: 'spec.template.documents', message: `two documents render ${key}` }]);
      seen.add(key);
    }
    const installHook = spec.hooks?.install !== undefined ? place(spec.hooks.install, 'spec.hooks.install') : undefined;
    const body = { objects, ...(installHook !== undefined ? { installHook } : {}) };
    const upgradeHook = spec.hooks?.upgrade !== undefined ? place(spec.hooks.upgrade, 'spec.hooks.upgrade') : undefined;
    return Either.right({ ...body, ...(upgradeHook !== undefined ? { upgradeHook } : {}), digest: digestOf(body) });
  } catch (e) {
    if (e instanceof RenderFailure) return Either.left([e.problem]);
    throw e;
  }
};

/** The canonical bytes of a render (what "same input → same bytes" is about). */
export const renderedBytes = (r: Rendered): string =>
  canonicalJson({ objects: r.objects, ...(r.installHook !== undefined ? { installHook: r.installHook } : {}) });
