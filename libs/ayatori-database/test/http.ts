// A raw HTTPS call to the test bed's kube-apiserver with custom headers (Table views, impersonation).
import { request } from 'node:https';
import { testbed } from '@homelab/testbed/vitest';

export const httpCall = (
  url: string,
  options: { ca: string; headers: Record<string, string | string[]>; method?: string; body?: unknown },
): Promise<{ status: number; body: string }> =>
  new Promise((resolve, reject) => {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const req = request(
      new URL(url),
      {
        method: options.method ?? 'GET',
        ca: options.ca,
        headers: { ...options.headers, ...(payload ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {}) },
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });

/** A call made as another user (the admin token impersonates it), e.g. `system:serviceaccount:<ns>:<name>`. */
export const callAs = (user: string, groups: ReadonlyArray<string>, method: string, path: string, body?: unknown) => {
  const { kube } = testbed();
  return httpCall(`${kube.server}${path}`, {
    ca: kube.caCert,
    method,
    body,
    headers: { authorization: `Bearer ${kube.token}`, accept: 'application/json', 'impersonate-user': user, 'impersonate-group': [...groups] },
  });
};
