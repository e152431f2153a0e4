// `npm run render:extension-role -w @homelab/controller -- <package.json>`: prints the ClusterRole of one extension
// package for `--extension-rbac=external` (decision 0440). Exit 0 printed; 1 refused (problems on stderr); 2 usage.
import { readFileSync } from 'node:fs';
import { Either } from 'effect';
import { renderExtensionRole } from './rbac.js';

const file = process.argv[2];
if (file === undefined || process.argv.length > 3) {
  process.stderr.write('usage: render-extension-role <package document (kos-extension.json)>\n');
  process.exit(2);
}
const rendered = renderExtensionRole(readFileSync(file, 'utf8'));
if (Either.isLeft(rendered)) {
  process.stderr.write(`${rendered.left.join('\n')}\n`);
  process.exit(1);
}
process.stdout.write(rendered.right);
