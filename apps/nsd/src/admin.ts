// The owner's admin API of NSD (decision 0153): the policy stand-in's table — which consumer identities may use a
// service, over which protocols — and a read-only list of a Network's services with their sources. Plain JSON over
// HTTP with a bearer token (the signed M6 envelope is for nodes, not for the owner). Disabled without a token.
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Either, type ParseResult, Schema } from 'effect';
import { DeclarationCodec, fromHex, toHex, uuidText } from '@homelab/service-control';
import type { Authority, PolicyEdit } from '@homelab/service-control/application';
import { readBody } from '@homelab/service-control/transport';

const Hex = (bytes: number) =>
  Schema.String.pipe(
    Schema.pattern(new RegExp(`^[0-9a-f]{${bytes * 2}}$`)),
    Schema.annotations({ description: `${bytes} bytes, lowercase hex` }),
  );
const Protocol = Schema.Literal('tcp', 'udp');

/** `PUT /v1/admin/policy`: allow one consumer source of a service. */
export const PolicyAllow = Schema.Struct({
  service_id: Hex(16),
  consumer: Hex(32),
  protocols: Schema.Array(Protocol).pipe(Schema.minItems(1)),
});
/** `DELETE /v1/admin/policy`: remove one consumer source (the consumer's Grant is withdrawn, its flows die). */
export const PolicyRemove = Schema.Struct({ service_id: Hex(16), consumer: Hex(32) });

const json = (res: ServerResponse, status: number, body: unknown): void =>
  void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

const authorized = (req: IncomingMessage, token: string): boolean => {
  const got = Buffer.from(req.headers.authorization ?? '');
  const want = Buffer.from(`Bearer ${token}`);
  return got.length === want.length && timingSafeEqual(got, want);
};

/**
 * The HTTP status of a refused admin request: `unauthorized` here is a Network of another authority shard (the owner
 * is authenticated by the token; decision 0455) — 421 Misdirected Request, the detail names the shard to ask
 * (decision 0485); any other code keeps the route's status.
 */
const adminStatus = (code: string, otherwise: number): number => (code === 'unauthorized' ? 421 : otherwise);

/** Handles `/v1/admin/*`; returns false when the route is not an admin route. */
export const handleAdmin = (
  authority: Authority,
  token: string | null,
  req: IncomingMessage,
  res: ServerResponse,
): boolean => {
  const url = new URL(req.url ?? '/', 'http://nsd');
  if (!url.pathname.startsWith('/v1/admin/')) return false;
  if (token === null) return (json(res, 404, { error: 'admin API disabled: set NSD_ADMIN_TOKEN' }), true);
  if (!authorized(req, token)) return (json(res, 401, { error: 'missing or wrong bearer token' }), true);
  void (async () => {
    try {
      if (req.method === 'GET' && url.pathname === '/v1/admin/services') {
        const network = url.searchParams.get('network') ?? '';
        if (!/^[0-9a-f]{32}$/.test(network))
          return json(res, 400, { error: 'query parameter network: 16 bytes, lowercase hex' });
        const r = await authority.policyOf(fromHex(network));
        if (Either.isLeft(r))
          return json(res, adminStatus(r.left.code, 503), { error: r.left.code, detail: r.left.detail });
        return json(res, 200, {
          services: r.right.services.map((s) => {
            const id = toHex(s.serviceId);
            const d = DeclarationCodec.decode(s.declaration);
            return {
              service_id: id,
              service_ulid: uuidText(s.serviceId),
              publisher: toHex(s.publisher),
              declaration_key: s.declarationKey,
              display_name: Either.isRight(d) ? d.right.display_name : null,
              state: s.state,
              P: s.port === null ? null : Number(s.port),
              policy_version: String(r.right.policy.versions.get(id) ?? 1n),
              sources: (r.right.policy.sources.get(id) ?? []).map((x) => ({
                consumer: toHex(x.consumer),
                protocols: x.protocols,
              })),
            };
          }),
        });
      }
      if (url.pathname === '/v1/admin/policy' && (req.method === 'PUT' || req.method === 'DELETE')) {
        let raw: unknown;
        try {
          raw = JSON.parse(Buffer.from(await readBody(req)).toString('utf8'));
        } catch {
          return json(res, 400, { error: 'body is not JSON' });
        }
        const edit: Either.Either<{ readonly serviceId: string; readonly edit: PolicyEdit }, ParseResult.ParseError> =
          req.method === 'PUT'
            ? Either.map(Schema.decodeUnknownEither(PolicyAllow)(raw, { onExcessProperty: 'error' }), (b) => ({
                serviceId: b.service_id,
                edit: { consumer: fromHex(b.consumer), protocols: b.protocols },
              }))
            : Either.map(Schema.decodeUnknownEither(PolicyRemove)(raw, { onExcessProperty: 'error' }), (b) => ({
                serviceId: b.service_id,
                edit: { consumer: fromHex(b.consumer), remove: true as const },
              }));
        if (Either.isLeft(edit)) return json(res, 400, { error: 'invalid body', detail: String(edit.left.message) });
        const r = await authority.editPolicy(fromHex(edit.right.serviceId), edit.right.edit);
        if (Either.isLeft(r))
          return json(res, r.left.code === 'storage-unavailable' ? 503 : adminStatus(r.left.code, 409), {
            error: r.left.code,
            detail: r.left.detail,
          });
        if (r.right.outcome === 'unknown-service') return json(res, 404, { error: 'no active service with this id' });
        return json(res, 200, { outcome: r.right.outcome, policy_version: String(r.right.policyVersion) });
      }
      return json(res, 404, { error: 'no such admin route' });
    } catch (e) {
      return json(res, 500, { error: 'internal', detail: e instanceof Error ? e.message : String(e) });
    }
  })();
  return true;
};
