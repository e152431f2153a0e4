// A raw HTTPS call to the test bed's kube-apiserver with custom headers (Table views, impersonation).
import { httpCall as call, testbed } from '@homelab/testbed/vitest';

export const httpCall = (
  url: string,
  options: { ca: string; headers: Record<string, string | ReadonlyArray<string>>; method?: string; body?: unknown },
): Promise<{ status: number; body: string }> =>
  call(url, {
    method: options.method ?? 'GET',
    ca: options.ca,
    headers: { ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    timeoutMs: 30_000,
  });

/** A call made as another user (the admin token impersonates it), e.g. `system:serviceaccount:<ns>:<name>`. */
export const callAs = (
  user: string,
  groups: ReadonlyArray<string>,
  method: string,
  path: string,
  body?: unknown,
  contentType?: string,
) => {
  const { kube } = testbed();
  return httpCall(`${kube.server}${path}`, {
    ca: kube.caCert,
    method,
    body,
    headers: {
      authorization: `Bearer ${kube.token}`,
      accept: 'application/json',
      'impersonate-user': user,
      'impersonate-group': [...groups],
      ...(contentType === undefined ? {} : { 'content-type': contentType }),
    },
  });
};
