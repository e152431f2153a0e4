// Test helper: build A→B request messages for a given identity/scope (the shapes an ns-daemon sends).
import { randomBytes } from 'node:crypto';
import { type Message, encodeMessage } from '../src/api/message.js';
import { type ReportContent, reportDigest } from '../src/api/report.js';

export interface Who {
  readonly identity: Uint8Array;
  readonly nsdId: Uint8Array;
  readonly networkId: Uint8Array;
  gen: bigint | null;
  rid: Uint8Array | null;
  epoch: bigint | null;
}

export const rid16 = (): Uint8Array => new Uint8Array(randomBytes(16));

export const msg = (w: Who, kind: string, body: unknown, extra: Record<string, unknown> = {}): Uint8Array =>
  encodeMessage({
    schema: 1,
    kind,
    nsd_id: w.nsdId,
    network_id: w.networkId,
    subject_identity: w.identity,
    runtime_generation: w.gen,
    runtime_id: w.rid,
    authority_epoch: w.epoch,
    request_id: rid16(),
    body,
    ...extra,
  } as unknown as Message);

export const pubScope = (w: Who) => ({ publisher_identity: w.identity, nsd_id: w.nsdId, network_id: w.networkId });
export const subScope = (w: Who) => ({ subject_identity: w.identity, nsd_id: w.nsdId, network_id: w.networkId });

export const decl = (key: string, display: string | null = null, port = 8080) => ({
  declaration_key: key,
  display_name: display,
  description: null,
  enabled: true,
  protocols: ['tcp'] as const,
  backend_host: { ipv4: new Uint8Array([127, 0, 0, 1]) },
  backend_port: port,
  port_mode: 'auto' as const,
  requested_port: null,
});

export const content = (w: Who, decls: ReturnType<typeof decl>[]): ReportContent =>
  ({
    scope: pubScope(w),
    strict_mode: false,
    declarations: [...decls].sort((a, b) =>
      Buffer.compare(Buffer.from(a.declaration_key), Buffer.from(b.declaration_key)),
    ),
  }) as unknown as ReportContent;

export const replaceBody = (w: Who, revision: bigint, decls: ReturnType<typeof decl>[]) => {
  const c = content(w, decls);
  return { scope: pubScope(w), report_revision: revision, report_digest: reportDigest(c), content: c };
};
