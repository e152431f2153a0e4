// Deterministic YAML: map keys sorted at every level (as controller-gen emits them), no line folding, one
// document per object, each opened by `---`, LF line endings, a trailing newline.
import { stringify } from 'yaml';

export interface RenderOptions {
  /** Comment lines put at the top of the file (without the leading `#`). */
  readonly header?: ReadonlyArray<string>;
}

export const renderYaml = (objects: ReadonlyArray<unknown>, options: RenderOptions = {}): string => {
  const header = (options.header ?? []).map((line) => (line === '' ? '#\n' : `# ${line}\n`)).join('');
  const docs = objects.map(
    (o) =>
      `---\n${stringify(o, { sortMapEntries: true, lineWidth: 0, indent: 2, indentSeq: false, aliasDuplicateObjects: false })}`,
  );
  return header + docs.join('');
};
