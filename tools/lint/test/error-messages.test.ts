// Useful errors: a tagged error without a `message` prints as "An error has occurred" in logs, `String(e)` and
// Effect's Cause.pretty (ns-daemon logged `TransportError: An error has occurred` for every lost nsd connection).
// Every exported tagged error class in libs/*/src and apps/*/src carries a `message` field or a `message` getter.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../../..');

const sources = (): string[] => {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(path);
      else if (path.endsWith('.ts') && !path.endsWith('.test.ts')) out.push(path);
    }
  };
  for (const group of ['libs', 'apps'])
    for (const pkg of readdirSync(join(root, group)))
      if (existsSync(join(root, group, pkg, 'src'))) walk(`${group}/${pkg}/src`);
  return out;
};

/** The text from `open` (an index of `{`) to its matching `}`. */
const balanced = (text: string, open: number): string => {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) return text.slice(open, i + 1);
  }
  return text.slice(open);
};

/** The text from `open` (an index of `<`) to its matching `>`, braces and arrows inside it skipped. */
const angled = (text: string, open: number): string => {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '=' && text[i + 1] === '>') i++;
    else if (text[i] === '<') depth++;
    else if (text[i] === '>' && --depth === 0) return text.slice(open, i + 1);
  }
  return text.slice(open);
};

/** Tagged error classes of a source text whose fields (inline or a same-file interface) and body never say `message`. */
export const silentErrors = (text: string): string[] => {
  const interfaceText = (name: string): string => {
    const i = text.search(new RegExp(`(interface ${name}\\b[^{]*|type ${name}\\s*=\\s*)\\{`));
    return i < 0 ? '' : balanced(text, text.indexOf('{', i));
  };
  const out: string[] = [];
  for (const m of text.matchAll(/export class (\w+) extends (?:Data|Schema)\.TaggedError(?:<[^>]*>)?\([^)]*\)/g)) {
    let at = (m.index ?? 0) + m[0].length;
    let fields = '';
    if (text[at] === '<') {
      fields = angled(text, at);
      at += fields.length;
      for (const id of fields.match(/\b[A-Z]\w*/g) ?? []) fields += interfaceText(id);
    }
    const body = balanced(text, text.indexOf('{', at));
    if (!/\bmessage\b/.test(fields) && !/get message\(\)/.test(body)) out.push(m[1] as string);
  }
  return out;
};

describe('tagged errors say what failed', () => {
  it('finds a silent error class, and accepts a message field or getter', () => {
    const decl = (body: string) =>
      `export class Lost extends Data.TaggedError('Lost')<{\n  readonly reason: string;\n}> ${body}`;
    expect(silentErrors(decl('{}'))).toEqual(['Lost']);
    expect(silentErrors(decl('{\n  override get message(): string {\n    return this.reason;\n  }\n}'))).toEqual([]);
    expect(silentErrors(`export class E extends Data.TaggedError('E')<{ readonly message: string }> {}`)).toEqual([]);
    const common = `interface Common {\n  readonly message: string;\n}\n`;
    expect(
      silentErrors(`${common}export class N extends Data.TaggedError('N')<Common & { readonly code: number }> {}`),
    ).toEqual([]);
  });

  it('every exported tagged error in libs and apps carries a message', () => {
    const silent = sources().flatMap((file) =>
      silentErrors(readFileSync(join(root, file), 'utf8')).map((name) => `${file}: ${name}`),
    );
    expect(silent).toEqual([]);
  });
});
