// The daemon's NSD is its Network's authority shard's (decision 0485): `--nsd-url` takes one URL (as before) or the
// list `1=url,…,N=url` of every shard's NSD, and the daemon picks shard `shardOf(network, N)` — the function the NSD
// processes refuse other shards' Networks with (decision 0455). A list that is not exactly shards 1..N is refused.
import { randomBytes } from 'node:crypto';
import { shardOf } from '@homelab/service-control';
import { describe, expect, it } from 'vitest';
import { loadConfig, nsdOfNetwork } from '../src/config.js';

/** A random Network id (hex) of shard `index` of `count`. */
const networkOf = (index: number, count: number): string => {
  for (;;) {
    const n = randomBytes(16);
    if (shardOf(new Uint8Array(n), count) === index) return n.toString('hex');
  }
};
const URLS = ['http://nsd-1.example:7400', 'http://nsd-2.example:7400', 'https://nsd-3.example'];

describe('ns-daemon --nsd-url with a shard list (decision 0485)', () => {
  it('one URL is the NSD of the Network, whatever its shard (no shard chosen)', () => {
    const net = networkOf(2, 2);
    expect(nsdOfNetwork('http://127.0.0.1:7400', net)).toEqual({ url: 'http://127.0.0.1:7400', shard: null });
  });

  it('a list of N shard URLs: every Network gets the URL of its own shard of N, in any order of the entries', () => {
    for (const count of [1, 2, 3]) {
      const list = URLS.slice(0, count).map((u, i) => `${i + 1}=${u}`);
      for (let index = 1; index <= count; index++) {
        const net = networkOf(index, count);
        const want = { url: URLS[index - 1], shard: { index, count } };
        expect(nsdOfNetwork(list.join(','), net)).toEqual(want);
        expect(nsdOfNetwork([...list].reverse().join(', '), net)).toEqual(want);
      }
    }
  });

  it('a list that is not exactly the shards 1..N is refused with what is wrong', () => {
    const net = networkOf(1, 2);
    expect(nsdOfNetwork(`1=${URLS[0]},3=${URLS[1]}`, net)).toEqual({
      error: "shard 3 outside 1..2 (the list's length is the shard count)",
    });
    expect(nsdOfNetwork(`1=${URLS[0]},1=${URLS[1]}`, net)).toEqual({ error: 'shard 1 is listed twice' });
    expect(nsdOfNetwork(`1=${URLS[0]},2=nsd-2:7400`, net)).toEqual({
      error: 'shard 2: "nsd-2:7400" is not an http(s) URL',
    });
    expect(nsdOfNetwork(`1=${URLS[0]},${URLS[1]}`, net)).toEqual({
      error: `"${URLS[1]}" is not shard=url (a list is 1=url,2=url,…)`,
    });
    expect(nsdOfNetwork(`0=${URLS[0]}`, net)).toEqual({
      error: "shard 0 outside 1..1 (the list's length is the shard count)",
    });
  });

  it('the configuration carries the chosen URL and shard; a bad list is a configuration error', () => {
    const net = networkOf(2, 2);
    const env = { NS_NSD_KEY: 'c'.repeat(64), NS_NETWORK: net, NS_NSD_URL: `1=${URLS[0]},2=${URLS[1]}/` };
    expect(loadConfig(env, [])).toMatchObject({ nsdUrl: URLS[1], nsdShard: { index: 2, count: 2 } });
    expect(() => loadConfig({ ...env, NS_NSD_URL: `2=${URLS[1]}` }, [])).toThrow(
      /^NS_NSD_URL \/ --nsd-url: shard 2 outside 1\.\.1/,
    );
  });
});
