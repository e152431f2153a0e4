// Decision 0620: nsd's bound on unary requests in flight, through the real process. `--max-unary-in-flight`
// (NSD_MAX_UNARY_IN_FLIGHT) is honoured: with N requests admitted and waiting for their bodies, the next one is refused
// at once with 503 `storage-unavailable` and `retry-after` (nothing read, verified or stored), counted on /metrics; once
// the N are answered, requests are served again.
import { connect } from 'node:net';
import { Effect } from 'effect';
import { useDatabase } from '@homelab/testbed/vitest';
import { describe, expect, it } from 'vitest';
import { InfoGetResponseCodec } from '@homelab/service-control';
import { ReplayCache, generateSigner, postUnary, trustOnly } from '@homelab/service-control/transport';
import { processWorkspace, startNsd, until } from './processes.js';

const db = useDatabase('nsd_admission');
const ws = processWorkspace('nsd-admission');

/** The value of one metric line without labels. */
const metric = async (url: string, name: string): Promise<number> => {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} on /metrics`);
  return Number(line.split(' ')[1]);
};

/** A unary request whose headers are sent and whose 10-byte body is not (yet): nsd admits it and waits for the body. */
const halfSent = (port: number) => {
  const socket = connect(port, '127.0.0.1');
  let answer = '';
  socket.setEncoding('utf8');
  socket.on('data', (c: string) => (answer += c));
  socket.write(
    'POST /v1/info.get HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/octet-stream\r\ncontent-length: 10\r\n\r\n',
  );
  return {
    /** Send the body (not an envelope): nsd answers it with a refusal of its encoding. */
    finish: () => socket.write('0123456789'),
    answered: () => answer.startsWith('HTTP/1.1 '),
    close: () => socket.destroy(),
  };
};

describe('nsd admission bound (decision 0620)', () => {
  it('--max-unary-in-flight N: the request after N in flight is refused with a retryable 503 and counted; served again after', async () => {
    const nsd = await startNsd(ws, db, [], { NSD_MAX_UNARY_IN_FLIGHT: '2' });
    expect(await metric(nsd.url, 'nsd_unary_in_flight_limit')).toBe(2);
    const held = [halfSent(nsd.port), halfSent(nsd.port)];
    try {
      await until(
        () => metric(nsd.url, 'nsd_unary_in_flight'),
        (n) => n === 2,
        20_000,
      );
      const over = await fetch(`${nsd.url}/v1/info.get`, { method: 'POST', body: new Uint8Array([0xa0]) });
      expect([over.status, over.headers.get('retry-after'), await over.text()]).toEqual([
        503,
        '1',
        'storage-unavailable',
      ]);
      expect(await metric(nsd.url, 'nsd_unary_refused_total')).toBe(1);
      for (const h of held) h.finish();
      await until(
        async () => held.every((h) => h.answered()),
        (all) => all,
        20_000,
      );
      expect(await metric(nsd.url, 'nsd_unary_in_flight')).toBe(0);
      const side = {
        signer: generateSigner().signer,
        trust: trustOnly(Buffer.from(nsd.key, 'hex')),
        replay: new ReplayCache(),
      };
      const info = InfoGetResponseCodec.decodeOrThrow(
        await Effect.runPromise(postUnary(side, `${nsd.url}/v1/info.get`, new Uint8Array([0xa0]))),
      );
      expect(info.capabilities).toContain('service_control.v1');
      expect(await metric(nsd.url, 'nsd_unary_refused_total')).toBe(1);
    } finally {
      for (const h of held) h.close();
      nsd.proc.child.kill('SIGTERM');
      await nsd.proc.exited;
    }
  });
});
