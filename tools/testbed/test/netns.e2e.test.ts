// Two test-bed nodes as network namespaces (issue 20 step 4, first part): a TCP nonce goes from a process in node 1
// to a server in node 2 over the link-local bridge, the root namespace reaches node 2 too, and `netnsDown` leaves
// nothing behind. Needs root (the machines and CI run as root).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { netnsDown, netnsLayout, netnsList, netnsUp } from '../src/netns.js';

const prefix = `t${process.pid % 100000}`;
const started: ChildProcess[] = [];
afterAll(() => {
  for (const p of started) p.kill(); // the processes this test started, by handle
  netnsDown(prefix);
});

const inNs = (ns: string, code: string): ChildProcess => {
  const p = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(p);
  return p;
};

const output = (p: ChildProcess): Promise<string> =>
  new Promise((ok, fail) => {
    let out = '';
    p.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', fail);
    p.on('close', () => ok(out));
  });

describe('testbed netns', () => {
  it('two node namespaces talk TCP over link-local addresses only; down removes them', async () => {
    const layout = netnsUp(netnsLayout(prefix, 2));
    const [n1, n2] = layout.nodes;
    expect(netnsList(prefix).sort()).toEqual([n1?.name, n2?.name].sort());
    // only link-local routes inside a node: no default route
    expect(execFileSync('ip', ['-n', n1!.name, 'route', 'show'], { encoding: 'utf8' })).not.toMatch(/default/);
    const server = inNs(
      n2!.name,
      `require('node:net').createServer((s) => s.pipe(s)).listen(7777, '${n2!.address}', () => console.log('ready'))`,
    );
    await new Promise<void>((ok) => server.stdout?.once('data', () => ok()));
    const nonce = randomBytes(8).toString('hex');
    const client = inNs(
      n1!.name,
      `const s = require('node:net').connect(7777, '${n2!.address}', () => s.write('${nonce}')); s.on('data', (d) => { console.log(d.toString()); s.end(); });`,
    );
    expect((await output(client)).trim()).toBe(nonce);
    server.kill();
    netnsDown(prefix);
    expect(netnsList(prefix)).toEqual([]);
    expect(execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' })).not.toContain(`hl${prefix}`);
  });
});
