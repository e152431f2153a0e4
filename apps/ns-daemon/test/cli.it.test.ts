// `ns service retry-port <ServiceRef> --request-id <UUID>` (decision 0128): argument parsing and the request the
// command sends to the running daemon's listener (a loopback HTTP listener that records the request stands in for it).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRetryPort, parseServiceRef, runServiceCommand } from '../src/cli.js';

const NSD = '00112233-4455-6677-8899-aabbccddeeff';
const NET = '0190f3a0-b1c2-d3e4-f506-1728394a5b6c';
const SVC = '0190f3a0-b1c2-d3e4-f506-1728394a5b6d';
const RID = '6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b';

describe('ns service retry-port', () => {
  it('M6-45 parses the ServiceRef as three canonical UUIDs and the request id as a UUID', () => {
    const a = parseRetryPort(['service', 'retry-port', `${NSD}/${NET}/${SVC}`, '--request-id', RID]);
    if (typeof a === 'string') throw new Error(a);
    expect(Buffer.from(a.serviceRef.nsd_id).toString('hex')).toBe(NSD.replaceAll('-', ''));
    expect(Buffer.from(a.serviceRef.service_id).toString('hex')).toBe(SVC.replaceAll('-', ''));
    expect(Buffer.from(a.requestId).toString('hex')).toBe(RID.replaceAll('-', ''));
    expect(typeof parseRetryPort(['service', 'retry-port', `${NSD}/${NET}/${SVC}`, `--request-id=${RID}`])).toBe(
      'object',
    );
    // Network/Service may be given as ULID text (the same 16 bytes)
    expect(parseServiceRef(`${NSD}/01J3SA1CE2KFAFC5RQ75592PVC/${SVC}`)).not.toBeNull();
    for (const bad of [
      ['service', 'retry-port', `${NSD}/${NET}`, '--request-id', RID],
      ['service', 'retry-port', `${NSD.toUpperCase()}/${NET}/${SVC}`, '--request-id', RID],
      ['service', 'retry-port', `${NSD}/${NET}/${SVC}`],
      ['service', 'retry-port', `${NSD}/${NET}/${SVC}`, '--request-id', 'not-a-uuid'],
      ['service', 'retry', `${NSD}/${NET}/${SVC}`, '--request-id', RID],
    ])
      expect(typeof parseRetryPort(bad)).toBe('string');
  });

  const seen: unknown[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, body: JSON.parse(raw) });
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ allocation_round: '2', proposal_seq: '9' }));
    });
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('M6-45 sends the ServiceRef and the reused request id to the daemon listener; exit 0 on an answer, 1 when unreachable, 2 on usage', async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    const argv = ['service', 'retry-port', `${NSD}/${NET}/${SVC}`, '--request-id', RID, `--port=${port}`];
    expect(await runServiceCommand(argv, {})).toBe(0);
    expect(await runServiceCommand(argv, {})).toBe(0);
    expect(seen).toHaveLength(2);
    expect(seen[0]).toEqual({
      method: 'POST',
      url: '/v1/owner/retry-port',
      body: {
        nsd_id: NSD.replaceAll('-', ''),
        network_id: NET.replaceAll('-', ''),
        service_id: SVC.replaceAll('-', ''),
        request_id: RID.replaceAll('-', ''),
      },
    });
    expect(seen[1]).toEqual(seen[0]); // the same request id again: B answers idempotently
    expect(await runServiceCommand(['service', 'retry-port', 'x'], {})).toBe(2);
    expect(await runServiceCommand([...argv.slice(0, 5), '--port=1'], {})).toBe(1);
  });
});
