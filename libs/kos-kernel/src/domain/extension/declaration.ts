// Declaration validation (seed 000 C-18/C-28: "某一贡献类校验失败只让该类缺席，组件降级，其余类照常生效"; digest §6.12;
// decision 0301). The header decodes all-or-nothing; each of the nine contribution kinds is decoded and checked on
// its own, and a failing kind is absent with its problems listed. Pure.
import { Either, ParseResult, Schema } from 'effect';
import {
  CONTRIBUTION_KINDS,
  CONTRIBUTION_SCHEMAS,
  type ContributionKind,
  type Contributions,
  DeclarationHeader,
} from '../../api/extension/declaration.js';
import { KOS_GROUP } from '../../api/group.js';
import { protectedGroupProblem } from './protected-groups.js';
import { scopeProblems } from './write-scope.js';

export interface KindFailure {
  readonly kind: ContributionKind;
  readonly problems: ReadonlyArray<string>;
}

/** A declaration whose header decoded: its loaded kinds and the kinds that failed. */
export interface ValidDeclaration {
  readonly _tag: 'Valid';
  readonly header: Omit<DeclarationHeader, 'contributes'>;
  readonly contributions: Contributions;
  readonly failures: ReadonlyArray<KindFailure>;
}
export interface InvalidDeclaration {
  readonly _tag: 'Invalid';
  readonly problems: ReadonlyArray<string>;
}
export type CheckedDeclaration = ValidDeclaration | InvalidDeclaration;

const issues = (e: ParseResult.ParseError): ReadonlyArray<string> =>
  ParseResult.ArrayFormatter.formatErrorSync(e).map((i) =>
    i.path.length === 0 ? i.message : `${i.path.join('.')}: ${i.message}`,
  );

const duplicates = (values: ReadonlyArray<string>): ReadonlyArray<string> =>
  [...new Set(values.filter((v, i) => values.indexOf(v) !== i))].sort();

const dupProblems = (what: string, values: ReadonlyArray<string>) =>
  duplicates(values).map((d) => `${what} "${d}" is declared more than once`);

/** The checks a kind's Schema cannot express; `loaded` = the kinds decoded so far (controllers need `kinds`). */
const semanticProblems = (
  kind: ContributionKind,
  value: unknown,
  loaded: Contributions,
  modules: ReadonlySet<string> | undefined,
): ReadonlyArray<string> => {
  switch (kind) {
    case 'kinds': {
      const v = value as NonNullable<Contributions['kinds']>;
      return [
        ...v
          .filter((k) => k.group === KOS_GROUP)
          .map((k) => `${k.kind}: the group ${KOS_GROUP} is the kernel's; an extension kind lives in its own group`),
        // the controller is granted full use of each kind's group/plural (decision 0440): never a Kubernetes group
        ...v.flatMap((k) => {
          const problem = k.group === KOS_GROUP ? undefined : protectedGroupProblem(k.group);
          return problem === undefined ? [] : [`${k.kind}: ${problem}; an extension kind lives in its own group`];
        }),
        ...dupProblems(
          'kind',
          v.map((k) => `${k.group}/${k.kind}`),
        ),
        ...dupProblems(
          'plural',
          v.map((k) => `${k.group}/${k.plural}`),
        ),
      ];
    }
    case 'controllers': {
      const v = value as NonNullable<Contributions['controllers']>;
      const kinds = new Set((loaded.kinds ?? []).map((k) => k.kind));
      const ownGroups = [...new Set((loaded.kinds ?? []).map((k) => k.group))];
      return [
        ...v.flatMap((c) => scopeProblems(c.name, c.writeScope, ownGroups)),
        ...v
          .filter((c) => !kinds.has(c.kind))
          .map((c) => `controller ${c.name}: kind ${c.kind} is not an object kind this declaration contributes`),
        ...(modules === undefined
          ? []
          : v
              .filter((c) => !modules.has(c.module))
              .map((c) => `controller ${c.name}: module ${c.module} is not in the package`)),
        ...dupProblems(
          'controller',
          v.map((c) => c.name),
        ),
      ];
    }
    case 'capabilities':
      return dupProblems(
        'capability',
        (value as NonNullable<Contributions['capabilities']>).map((c) => c.name),
      );
    case 'pages': {
      const v = value as NonNullable<Contributions['pages']>;
      return [
        ...dupProblems(
          'page',
          v.map((p) => p.id),
        ),
        ...dupProblems(
          'page path',
          v.map((p) => p.path),
        ),
      ];
    }
    case 'settings':
      return dupProblems(
        'setting',
        (value as NonNullable<Contributions['settings']>).map((s) => s.id),
      );
    case 'catalogueSources': {
      const v = value as NonNullable<Contributions['catalogueSources']>;
      return [
        ...dupProblems(
          'catalogue source',
          v.map((s) => s.id),
        ),
        ...dupProblems(
          'catalogue entry',
          v.flatMap((s) => s.entries.map((e) => e.id)),
        ),
      ];
    }
    case 'discoveryAdapters':
    case 'diagnosticAdapters':
      return dupProblems(
        'adapter',
        (value as ReadonlyArray<{ id: string }>).map((a) => a.id),
      );
    case 'preferences':
      return dupProblems(
        'preference key',
        (value as NonNullable<Contributions['preferences']>).keys.map((k) => k.key),
      );
  }
};

/**
 * Check a declaration. `modules` = the package's module paths (controllers must name one); omitted = not checked.
 */
export const checkDeclaration = (raw: unknown, modules?: ReadonlyArray<string>): CheckedDeclaration => {
  const header = Schema.decodeUnknownEither(DeclarationHeader)(raw, { errors: 'all' });
  if (Either.isLeft(header)) return { _tag: 'Invalid', problems: issues(header.left) };
  const rawContributes = (raw as { contributes?: unknown }).contributes;
  const unknownKinds =
    rawContributes !== null && typeof rawContributes === 'object'
      ? Object.keys(rawContributes).filter((k) => !(CONTRIBUTION_KINDS as ReadonlyArray<string>).includes(k))
      : [];
  if (unknownKinds.length > 0)
    return {
      _tag: 'Invalid',
      problems: unknownKinds.map((k) => `contributes.${k}: not one of the nine contribution kinds`),
    };
  const { contributes, ...rest } = header.right;
  const moduleSet = modules === undefined ? undefined : new Set(modules);
  const contributions: Record<string, unknown> = {};
  const failures: KindFailure[] = [];
  for (const kind of CONTRIBUTION_KINDS) {
    const value = contributes[kind];
    if (value === undefined) continue;
    const decoded = Schema.decodeUnknownEither(CONTRIBUTION_SCHEMAS[kind] as Schema.Schema<unknown, unknown>)(value, {
      errors: 'all',
    });
    if (Either.isLeft(decoded)) {
      failures.push({ kind, problems: issues(decoded.left) });
      continue;
    }
    const problems = semanticProblems(kind, decoded.right, contributions as Contributions, moduleSet);
    if (problems.length > 0) failures.push({ kind, problems });
    else contributions[kind] = decoded.right;
  }
  return { _tag: 'Valid', header: rest, contributions: contributions as Contributions, failures };
};
