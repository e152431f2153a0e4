// The README example each library promises to consumers (decision 0281): the first ```ts block after the marker
// `<!-- packed-example -->`, and the ```text block after it holding exactly what the example prints.
export const EXAMPLE_MARKER = '<!-- packed-example -->';

export interface ReadmeExample {
  readonly code: string;
  readonly expectedOutput: string;
}

export class ExampleNotFound extends Error {
  override readonly name = 'ExampleNotFound';
}

const fenced = (text: string, lang: string, from: number): { body: string; end: number } | undefined => {
  const open = text.indexOf('```' + lang + '\n', from);
  if (open < 0) return undefined;
  const start = open + lang.length + 4;
  const close = text.indexOf('\n```', start);
  if (close < 0) return undefined;
  return { body: text.slice(start, close + 1), end: close + 4 };
};

/** The packed example of one README; ExampleNotFound names what is missing. */
export const readmeExample = (readme: string, packageName: string): ReadmeExample => {
  const at = readme.indexOf(EXAMPLE_MARKER);
  if (at < 0) throw new ExampleNotFound(`${packageName}: README.md has no ${EXAMPLE_MARKER} marker`);
  const code = fenced(readme, 'ts', at);
  if (code === undefined) throw new ExampleNotFound(`${packageName}: no \`\`\`ts block after ${EXAMPLE_MARKER}`);
  const output = fenced(readme, 'text', code.end);
  if (output === undefined) throw new ExampleNotFound(`${packageName}: no \`\`\`text output block after the example`);
  return { code: code.body, expectedOutput: output.body };
};
