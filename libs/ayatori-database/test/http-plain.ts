// One HTTP request to the OpenBao dev server with a given token (the test bed's helper always uses the root token).
import { httpCall as call } from '@homelab/testbed/vitest';

export const httpCall = (
  url: string,
  method: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; body: string }> =>
  call(url, {
    method,
    headers: { 'x-vault-token': token, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    timeoutMs: 10_000,
  });
