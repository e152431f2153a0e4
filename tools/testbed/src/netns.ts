// Test-bed nodes as Linux network namespaces (issue 20): `netnsUp` creates N namespaces, each with one veth whose peer
// is enslaved to a bridge in the root namespace. Addresses are link-local only (169.254.77.0/24 by default): the
// bridge is .1 (nsd and PostgreSQL stay in the root namespace and are reached there), node i is .(10+i). No default
// route, no forwarding: traffic stays between the namespaces made here. `netnsDown` deletes everything with the
// prefix (also after a crash: it finds leftovers by name). Needs root and iproute2.
import { execFileSync } from 'node:child_process';

export interface NetnsNode {
  readonly name: string;
  readonly address: string;
}

export interface NetnsLayout {
  readonly prefix: string;
  readonly bridge: string;
  readonly bridgeAddress: string;
  readonly nodes: readonly NetnsNode[];
}

const ip = (...args: string[]): string =>
  execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** Namespace/interface names stay ≤ 15 characters: `hl<prefix>` with a short prefix (letters/digits, ≤ 6). */
export const netnsLayout = (prefix: string, count: number, subnet = '169.254.77'): NetnsLayout => {
  if (!/^[a-z0-9]{1,6}$/.test(prefix)) throw new Error(`netns prefix must be 1–6 lowercase letters/digits: ${prefix}`);
  if (!/^169\.254\.\d{1,3}$/.test(subnet)) throw new Error(`netns subnet must be link-local 169.254.X: ${subnet}`);
  return {
    prefix,
    bridge: `hl${prefix}br`,
    bridgeAddress: `${subnet}.1`,
    nodes: Array.from({ length: count }, (_, i) => ({ name: `hl${prefix}n${i + 1}`, address: `${subnet}.${11 + i}` })),
  };
};

export const netnsUp = (layout: NetnsLayout): NetnsLayout => {
  netnsDown(layout.prefix);
  try {
    ip('link', 'add', layout.bridge, 'type', 'bridge');
    ip('addr', 'add', `${layout.bridgeAddress}/24`, 'dev', layout.bridge);
    ip('link', 'set', layout.bridge, 'up');
    layout.nodes.forEach((n, i) => {
      const host = `hl${layout.prefix}h${i + 1}`;
      ip('netns', 'add', n.name);
      ip('link', 'add', host, 'type', 'veth', 'peer', 'name', `hl${layout.prefix}v${i + 1}`);
      ip('link', 'set', `hl${layout.prefix}v${i + 1}`, 'netns', n.name);
      ip('link', 'set', host, 'master', layout.bridge);
      ip('link', 'set', host, 'up');
      ip('-n', n.name, 'link', 'set', 'lo', 'up');
      ip('-n', n.name, 'link', 'set', `hl${layout.prefix}v${i + 1}`, 'name', 'eth0');
      ip('-n', n.name, 'addr', 'add', `${n.address}/24`, 'dev', 'eth0');
      ip('-n', n.name, 'link', 'set', 'eth0', 'up');
    });
  } catch (e) {
    netnsDown(layout.prefix);
    throw e;
  }
  return layout;
};

/** Delete every namespace and interface named with this prefix (idempotent). */
export const netnsDown = (prefix: string): void => {
  for (const ns of ip('netns', 'list').split('\n')) {
    const name = ns.split(' ')[0] ?? '';
    if (name.startsWith(`hl${prefix}n`)) ip('netns', 'del', name);
  }
  for (const line of ip('-o', 'link', 'show').split('\n')) {
    const dev = /^\d+: ([^:@]+)/.exec(line)?.[1];
    if (dev === undefined || !dev.startsWith(`hl${prefix}`)) continue;
    try {
      ip('link', 'del', dev);
    } catch {
      // a veth goes away with its namespace's peer: already gone is the goal
    }
  }
};

/** The namespaces with this prefix that exist right now. */
export const netnsList = (prefix: string): string[] =>
  ip('netns', 'list')
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n.startsWith(`hl${prefix}n`));

/** `testbed netns up|down [--nodes N] [--prefix P]`: prints the layout as JSON on `up`. */
export const netnsCommand = (flags: readonly string[]): void => {
  const opt = (name: string, dflt: string): string => {
    const i = flags.indexOf(name);
    return i >= 0 ? (flags[i + 1] ?? dflt) : dflt;
  };
  const prefix = opt('--prefix', 'tb');
  if (flags[0] === 'up')
    process.stdout.write(`${JSON.stringify(netnsUp(netnsLayout(prefix, Number(opt('--nodes', '2')))))}\n`);
  else if (flags[0] === 'down') netnsDown(prefix);
  else {
    process.stderr.write('usage: testbed netns up|down [--nodes N] [--prefix P]\n');
    process.exitCode = 2;
  }
};
