// The `ceremony` command: parse, print help or run, exit with the documented code.
import { Either } from 'effect';
import { parseArgs, USAGE } from './args.js';
import { EXIT, run } from './run.js';

const main = async (): Promise<number> => {
  const parsed = parseArgs(process.argv.slice(2));
  if (Either.isLeft(parsed)) {
    process.stderr.write(`ceremony: ${parsed.left.message}\n\n${USAGE}`);
    process.stdout.write(
      `${JSON.stringify({ ok: false, error: { _tag: 'UsageError', message: parsed.left.message } })}\n`,
    );
    return EXIT.usage;
  }
  if (parsed.right._tag === 'help') {
    process.stdout.write(USAGE);
    return EXIT.ok;
  }
  return run(parsed.right, {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
    env: process.env,
  });
};

process.exitCode = await main();
