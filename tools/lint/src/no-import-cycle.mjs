// @ts-check
// `@homelab/no-import-cycle`: a module must not reach itself again through its static imports and re-exports.
// Unlike `import/no-cycle`, type-only imports count: a type-only circle still means a type lives in the wrong file
// (decision 0250). Only relative specifiers are followed — cycles between projects are Nx's module-boundary rule's job.
// The graph is read with TypeScript's parser (top-level `import`/`export … from` only, so `import()` does not count)
// and cached for the ESLint process, so linting a project parses each file once.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';

/** @type {Map<string, ReadonlyArray<{ specifier: string, target: string }>>} */
const edgesCache = new Map();

const sourceExtensions = ['.ts', '.tsx', '.mts', '.cts', '.mjs', '.js'];

/**
 * Resolves a relative specifier the way `moduleResolution: nodenext` does for our sources: `./x.js` names `./x.ts`.
 * @param {string} from absolute path of the importing file
 * @param {string} specifier
 * @returns {string | undefined}
 */
export function resolveRelative(from, specifier) {
  if (!specifier.startsWith('.')) return undefined;
  const base = resolve(dirname(from), specifier);
  const js = /\.(m|c)?js$/.exec(base);
  const candidates = js
    ? [base.slice(0, js.index) + js[0].replace('js', 'ts'), base]
    : [
        base,
        ...sourceExtensions.map((ext) => base + ext),
        ...sourceExtensions.map((ext) => resolve(base, `index${ext}`)),
      ];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile());
}

/**
 * The file's static relative imports and re-exports, type-only ones included.
 * @param {string} file absolute path
 * @param {string} [text] the file's text when the caller has it (the file being linted)
 */
export function staticEdges(file, text) {
  const cached = edgesCache.get(file);
  if (cached && text === undefined) return cached;
  const source = ts.createSourceFile(file, text ?? readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  /** @type {Array<{ specifier: string, target: string }>} */
  const edges = [];
  for (const statement of source.statements) {
    const moduleSpecifier =
      ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement) ? statement.moduleSpecifier : undefined;
    if (!moduleSpecifier || !ts.isStringLiteral(moduleSpecifier)) continue;
    const target = resolveRelative(file, moduleSpecifier.text);
    if (target) edges.push({ specifier: moduleSpecifier.text, target });
  }
  edgesCache.set(file, edges);
  return edges;
}

/**
 * A shortest path of files from `start` back to `goal`, or undefined.
 * @param {string} start
 * @param {string} goal
 * @returns {string[] | undefined}
 */
export function pathBack(start, goal) {
  /** @type {Map<string, string | null>} */
  const parent = new Map([[start, null]]);
  const queue = [start];
  while (queue.length > 0) {
    const file = /** @type {string} */ (queue.shift());
    if (file === goal) {
      const path = [];
      for (let at = /** @type {string | null | undefined} */ (file); at; at = parent.get(at)) path.unshift(at);
      return path;
    }
    for (const { target } of staticEdges(file)) {
      if (!parent.has(target)) {
        parent.set(target, file);
        queue.push(target);
      }
    }
  }
  return undefined;
}

/** @type {import('eslint').Rule.RuleModule} */
export const noImportCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'Forbid import cycles between modules, type-only imports included' },
    schema: [],
    messages: {
      cycle:
        'Import cycle: {{chain}}. Move the shared declaration to the module that owns it (type-only imports count).',
    },
  },
  create(context) {
    const file = resolve(context.filename);
    return {
      Program() {
        // Refresh this file's edges from the text being linted (it may differ from the disk in an editor).
        for (const { specifier, target } of staticEdges(file, context.sourceCode.text)) {
          const back = pathBack(target, file);
          if (!back) continue;
          const node = context.sourceCode.ast.body.find(
            (s) =>
              (s.type === 'ImportDeclaration' ||
                s.type === 'ExportNamedDeclaration' ||
                s.type === 'ExportAllDeclaration') &&
              s.source?.value === specifier,
          );
          const cwd = context.cwd;
          const chain = [file, ...back].map((f) => relative(cwd, f)).join(' → ');
          context.report({ node: node ?? context.sourceCode.ast, messageId: 'cycle', data: { chain } });
        }
      },
    };
  },
};
