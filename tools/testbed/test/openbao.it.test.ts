import { describe, expect, it } from 'vitest';
import { baoRequest, testbed, useKvPath } from '../src/vitest/index.js';

const kv = useKvPath('smoke');

describe('OpenBao dev server (real)', () => {
  it('is available on this test bed', () => {
    const { openbao } = testbed();
    expect(openbao.available ? 'available' : openbao.reason).toBe('available');
  });

  it('KV v2 write with cas: 0 succeeds once and fails the second time; read returns version 1', async () => {
    const path = `${kv.mount}/data/${kv.base}/cred`;
    const first = await baoRequest('POST', path, { data: { username: 'u1' }, options: { cas: 0 } });
    expect(first.status).toBe(200);
    expect((JSON.parse(first.body) as { data: { version: number } }).data.version).toBe(1);
    const second = await baoRequest('POST', path, { data: { username: 'u2' }, options: { cas: 0 } });
    expect(second.status).toBe(400);
    expect(second.body).toContain('check-and-set');
    const read = await baoRequest('GET', path);
    expect(read.status).toBe(200);
    const body = JSON.parse(read.body) as { data: { data: { username: string }; metadata: { version: number } } };
    expect(body.data.data.username).toBe('u1');
    expect(body.data.metadata.version).toBe(1);
  });
});
