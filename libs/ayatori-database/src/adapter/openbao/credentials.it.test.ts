// The OpenBao credential store (node-vault raw routes) on the test bed's real OpenBao dev server, with a
// short-lived token that holds only the controller policy. Where the seed uses an HTTP fake (read-back answers a
// real server never gives, a 500 with secrets in its body) this file does too: `FakeOpenBaoServer` is a local
// HTTP server, named as such, and backs no claim about OpenBao itself. The lost-answer case runs the real server
// behind `DroppingProxy`, which forwards everything and drops the answer of a successful PUT (as the seed does).
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { baoRequest, useKvPath } from '@homelab/testbed/vitest';
import { Effect, Either } from 'effect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApplicationCredential,
  type CredentialError,
  controllerPolicy,
  makeCredentialScope,
} from '../../domain/credential-location.js';
import { makeOpenBaoCredentials, type OpenBaoCredentials, OpenBaoCredentialStoreLive } from './credentials.js';

const kv = useKvPath('ayatori-adapter');
const suffix = randomBytes(4).toString('hex');
const policyName = `ayatori-adapter-${suffix}`;
const PASSWORD = `AYATORI-TEST-ONLY-app-password-${suffix}`;
let token = '';

const credential = Either.getOrThrow(
  ApplicationCredential.make('app_owner', PASSWORD, 'app', {
    host: 'postgres.example',
    hostAddr: '192.0.2.1',
    port: 5432,
    managementDatabase: 'app',
    tlsMode: 'verify-full',
  }),
);
const base = () => `${kv.base}/applications`;
const path = (leaf: string) => `${base()}/${leaf}`;
const store = (address = kv.addr, withToken = token): OpenBaoCredentials =>
  Either.getOrThrow(
    makeOpenBaoCredentials({ address, token: withToken, mount: kv.mount, basePath: base(), timeoutMs: 5_000 }),
  );
const outcome = async <A>(e: Effect.Effect<A, CredentialError>) => {
  const r = await Effect.runPromise(Effect.either(e));
  return Either.isLeft(r) ? r.left.code : 'Ok';
};
const stored = async (p: string) => {
  const r = await baoRequest('GET', `${kv.mount}/data/${p}`);
  return {
    status: r.status,
    body:
      r.status === 200
        ? (JSON.parse(r.body) as { data: { data: Record<string, string> | null; metadata: { version: number } } })
        : undefined,
  };
};

beforeAll(async () => {
  const scope = Either.getOrThrow(makeCredentialScope(kv.mount, base()));
  expect((await baoRequest('PUT', `sys/policies/acl/${policyName}`, { policy: controllerPolicy(scope) })).status).toBe(
    204,
  );
  const reply = await baoRequest('POST', 'auth/token/create', {
    policies: [policyName],
    no_default_policy: true,
    ttl: '10m',
  });
  token = (JSON.parse(reply.body) as { auth: { client_token: string } }).auth.client_token;
});

afterAll(async () => {
  await baoRequest('DELETE', `sys/policies/acl/${policyName}`);
});

/** A local HTTP server answering like OpenBao would not (the seed's httptest cases); counts requests. */
class FakeOpenBaoServer {
  readonly requests: Array<{ method: string; url: string; body: string }> = [];
  private server: http.Server | undefined;
  constructor(private readonly answer: (method: string, url: string) => { status: number; body: unknown }) {}
  async start(): Promise<string> {
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        this.requests.push({ method: req.method ?? '', url: req.url ?? '', body });
        const a = this.answer(req.method ?? '', req.url ?? '');
        res.writeHead(a.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(a.body));
      });
    });
    this.server = server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  close = () => new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
}

/** Forwards to the real OpenBao; drops the connection instead of relaying a successful PUT's answer. */
class DroppingProxy {
  private server: http.Server | undefined;
  requests = 0;
  async start(target: string): Promise<string> {
    const upstream = new URL(target);
    const server = http.createServer((req, res) => {
      this.requests++;
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
        (up) => {
          if (req.method === 'PUT' && up.statusCode === 200) {
            up.resume();
            res.socket?.destroy();
            return;
          }
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      req.pipe(forward);
    });
    this.server = server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  close = () => new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
}

describe('on the real OpenBao dev server', () => {
  it('AY-68: create-only write + read-back; a fresh adapter reads the 7 keys; a duplicate Create is Conflict and keeps version 1', async () => {
    const p = path('database-uid-1');
    expect(await outcome(store().create(p, credential))).toBe('Ok');
    const after = await stored(p);
    expect(after.body?.data.metadata.version).toBe(1);
    expect(after.body?.data.data).toEqual(credential.secretData());
    const restarted = store();
    const read = await Effect.runPromise(restarted.read(p));
    expect(read.secretData()).toEqual(credential.secretData());
    expect(await outcome(restarted.create(p, credential))).toBe('Conflict');
    const metadata = JSON.parse((await baoRequest('GET', `${kv.mount}/metadata/${p}`)).body) as {
      data: { current_version: number };
    };
    expect(metadata.data.current_version).toBe(1);
  });

  it('AY-66: two concurrent Creates on one path: exactly one succeeds, the other is Conflict (CAS on the real server)', async () => {
    for (let round = 0; round < 5; round++) {
      const p = path(`concurrent-${round}`);
      const results = await Promise.all([
        outcome(store().create(p, credential)),
        outcome(store().create(p, credential)),
      ]);
      expect([...results].sort()).toEqual(['Conflict', 'Ok']);
      expect((await stored(p)).body?.data.metadata.version).toBe(1);
    }
  });

  it('AY-69: a soft-deleted credential reads as NotFound and is never recreated (Create → Conflict)', async () => {
    const p = path('soft-deleted');
    expect(await outcome(store().create(p, credential))).toBe('Ok');
    expect((await baoRequest('DELETE', `${kv.mount}/data/${p}`)).status).toBe(204);
    expect(await outcome(store().read(p))).toBe('NotFound');
    expect(await outcome(store().create(p, credential))).toBe('Conflict');
    expect(await outcome(store().read(path('never-written')))).toBe('NotFound');
  });

  it('AY-65: a token without the policy (403) or an invalid token → Unavailable, nothing written; an unreachable server → Unavailable on read', async () => {
    const bare = JSON.parse(
      (await baoRequest('POST', 'auth/token/create', { policies: ['default'], ttl: '5m' })).body,
    ) as { auth: { client_token: string } };
    for (const t of [bare.auth.client_token, `s.invalid-${suffix}`]) {
      const p = path(`denied-${t.length}`);
      expect(await outcome(store(kv.addr, t).create(p, credential))).toBe('Unavailable');
      expect(await outcome(store(kv.addr, t).read(p))).toBe('Unavailable');
      expect((await stored(p)).status).toBe(404);
    }
    expect(await outcome(store('http://127.0.0.1:1').read(path('x')))).toBe('Unavailable');
  });

  it('AY-67: the real server stores the write but its answer is lost → Uncertain; a fresh adapter then gets Conflict, never adoption', async () => {
    const proxy = new DroppingProxy();
    const address = await proxy.start(kv.addr);
    try {
      const p = path('lost-answer');
      expect(await outcome(store(address).create(p, credential))).toBe('Uncertain');
      expect(proxy.requests).toBe(1); // one PUT, no retry, no read-back after a lost answer
      const confirmed = await stored(p);
      expect(confirmed.body?.data.metadata.version).toBe(1);
      expect(confirmed.body?.data.data).toEqual(credential.secretData());
      expect(await outcome(store().create(p, credential))).toBe('Conflict');
    } finally {
      await proxy.close();
    }
  });

  it('AY-65 (cancelled caller): an interrupted Create or Read sends no request and writes nothing', async () => {
    const proxy = new DroppingProxy();
    const address = await proxy.start(kv.addr);
    try {
      const s = store(address);
      const p = path('cancelled');
      for (const op of [s.create(p, credential), s.read(p)]) {
        const exit = await Effect.runPromise(Effect.exit(Effect.interrupt.pipe(Effect.zipRight(op))));
        expect(exit._tag).toBe('Failure');
      }
      expect(proxy.requests).toBe(0);
      expect((await stored(p)).status).toBe(404);
    } finally {
      await proxy.close();
    }
  });

  it('AY-62: paths outside the scope are refused before any request', async () => {
    const proxy = new DroppingProxy();
    const address = await proxy.start(kv.addr);
    try {
      const s = store(address);
      for (const bad of [
        base(),
        `${base()}/../x`,
        `${base()}/data/x`,
        `${base()}/metadata`,
        `other/x`,
        `${base()}/a//b`,
        `/${base()}/x`,
        `${base()}/x?y`,
      ]) {
        expect(await outcome(s.create(bad, credential))).toBe('InvalidLocation');
        expect(await outcome(s.read(bad))).toBe('InvalidLocation');
      }
      expect(proxy.requests).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it('AY-61: an invalid mount or base path fails the layer with InvalidLocation (no client built)', async () => {
    for (const [mount, basePath] of [
      ['secret/data', 'apps'],
      ['secret', 'apps/../x'],
      ['', 'apps'],
      ['secret', 'metadata'],
    ] as const) {
      const r = await Effect.runPromise(
        Effect.either(
          Effect.provide(Effect.void, OpenBaoCredentialStoreLive({ address: kv.addr, token, mount, basePath })),
        ),
      );
      expect(Either.isLeft(r) && r.left.code).toBe('InvalidLocation');
    }
  });
});

describe('HTTP-fake cases (as in the seed)', () => {
  const readBack = (scenario: string) => (method: string) => {
    if (method === 'PUT') return { status: 200, body: { data: { version: 1 } } };
    if (scenario === 'read failure') return { status: 503, body: { errors: [] } };
    const data: Record<string, string> = { ...credential.secretData() };
    if (scenario === 'changed password') data['password'] = 'modified';
    const response: Record<string, unknown> = { data };
    if (scenario !== 'missing metadata') response['metadata'] = { version: scenario === 'changed version' ? 2 : 1 };
    return { status: 200, body: { data: response } };
  };
  for (const scenario of ['read failure', 'changed version', 'changed password', 'missing metadata']) {
    it(`AY-63: read-back ${scenario} → Uncertain after exactly one PUT carrying options.cas = 0`, async () => {
      const fake = new FakeOpenBaoServer(readBack(scenario));
      const address = await fake.start();
      try {
        expect(await outcome(store(address, 'fake-token').create(path('readback'), credential))).toBe('Uncertain');
        const puts = fake.requests.filter((r) => r.method === 'PUT');
        expect(puts).toHaveLength(1);
        expect(puts[0]?.url).toBe(`/v1/${kv.mount}/data/${path('readback')}`);
        expect(JSON.parse(puts[0]?.body ?? 'null')).toEqual({ data: credential.secretData(), options: { cas: 0 } });
      } finally {
        await fake.close();
      }
    });
  }

  it('AY-64/AY-80: a 500 whose body holds secrets → Uncertain after one request; nothing of the body, path or token in the error', async () => {
    const leaked = `LEAK-${suffix}`;
    const fake = new FakeOpenBaoServer(() => ({ status: 500, body: { errors: [`internal ${leaked} ${PASSWORD}`] } }));
    const address = await fake.start();
    try {
      const r = await Effect.runPromise(
        Effect.either(store(address, `token-${leaked}`).create(path('boom'), credential)),
      );
      expect(fake.requests).toHaveLength(1);
      if (Either.isRight(r)) throw new Error('expected a failure');
      expect(r.left.code).toBe('Uncertain');
      const text = `${JSON.stringify(r.left)} ${String(r.left)} ${r.left.message} ${r.left.stack ?? ''}`;
      for (const s of [leaked, PASSWORD, path('boom'), 'fake-token']) expect(text).not.toContain(s);
    } finally {
      await fake.close();
    }
  });

  it('AY-66 (exact message): a 400 listing the CAS message is Conflict; a 400 with another message is Uncertain', async () => {
    for (const [errors, expected] of [
      [['check-and-set parameter did not match the current version'], 'Conflict'],
      [['something else: check-and-set parameter did not match the current version'], 'Uncertain'],
    ] as const) {
      const fake = new FakeOpenBaoServer(() => ({ status: 400, body: { errors } }));
      const address = await fake.start();
      try {
        expect(await outcome(store(address, 'fake-token').create(path('cas'), credential))).toBe(expected);
        expect(fake.requests).toHaveLength(1);
      } finally {
        await fake.close();
      }
    }
  });
});
