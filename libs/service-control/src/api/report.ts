// Declarations, report content and the report.* bodies (spec §2.5, §3.3), with the report digest (§2.4).
import { Codec, Domain, SortKey, type TypeOf } from '@homelab/cbor-canonical';
import { BackendHostCodec, Port, Protocols, PublisherScope, ServiceRefCodec } from './common.js';

const MAX_TEXT = 4096;

/**
 * One declaration. Key order on the wire: `enabled, port_mode, protocols, description, backend_host, backend_port,
 * display_name, requested_port, declaration_key` (spec §2.6). The fixed/auto rule is checked on top of the shape.
 */
export const DeclarationShape = Codec.struct({
  declaration_key: Codec.text({ minBytes: 1, maxBytes: MAX_TEXT }),
  display_name: Codec.nullable(Codec.text({ maxBytes: MAX_TEXT })),
  description: Codec.nullable(Codec.text({ maxBytes: MAX_TEXT })),
  enabled: Codec.bool,
  protocols: Protocols,
  backend_host: BackendHostCodec,
  backend_port: Port,
  port_mode: Codec.literal(['fixed', 'auto']),
  requested_port: Codec.nullable(Port),
});
export type DeclarationWire = TypeOf<typeof DeclarationShape>;

/** Fixed mode needs a non-zero `requested_port`; auto needs `null` (M6-22). */
export const DeclarationCodec = Codec.refine(
  DeclarationShape,
  (d) => (d.port_mode === 'fixed' ? d.requested_port !== null : d.requested_port === null),
  { message: 'fixed mode needs requested_port 1..65535, auto mode needs requested_port = null' },
);

/** `declarations`, sorted by the UTF-8 bytes of `declaration_key`, no duplicate keys. */
export const Declarations = Codec.sortedList(
  DeclarationCodec,
  SortKey.utf8((d: DeclarationWire) => d.declaration_key),
);

/** Full declaration content `{scope, strict_mode, declarations}`: what the report digest covers. */
export const ReportContentCodec = Codec.struct({
  scope: PublisherScope,
  strict_mode: Codec.bool,
  declarations: Declarations,
});
export type ReportContent = TypeOf<typeof ReportContentCodec>;

/** `SHA-256("ns.service.report.v1" ‖ 0x00 ‖ canonical(content))`. */
export const reportDigest = (content: ReportContent): Uint8Array =>
  ReportContentCodec.digestOrThrow(Domain.report, content);

/** report.head body. */
export const ReportHeadBody = Codec.struct({ scope: PublisherScope });

/** report.replace body: the content travels whole; its digest is recomputed by B and must match. */
export const ReportReplaceBody = Codec.struct({
  scope: PublisherScope,
  report_revision: Codec.counter,
  report_digest: Codec.bytes32,
  content: ReportContentCodec,
});
export type ReportReplaceBodyWire = TypeOf<typeof ReportReplaceBody>;

/** One binding of report.accepted: declaration key → ServiceRef / P / proposal state ([D] names). */
export const BindingCodec = Codec.struct({
  declaration_key: Codec.text({ minBytes: 1, maxBytes: MAX_TEXT }),
  service_ref: ServiceRefCodec,
  P: Codec.nullable(Port),
  proposal_state: Codec.text({ minBytes: 1, maxBytes: 64 }),
});
export type BindingWire = TypeOf<typeof BindingCodec>;

/** report.accepted (also the answer to report.head): revision 0 and digest null when there is no report. */
export const ReportAcceptedBody = Codec.refine(
  Codec.struct({
    scope: PublisherScope,
    accepted_revision: Codec.u64(),
    report_digest: Codec.nullable(Codec.bytes32),
    bindings: Codec.sortedList(
      BindingCodec,
      SortKey.utf8((b: BindingWire) => b.declaration_key),
    ),
  }),
  (r) =>
    (r.accepted_revision === 0n) === (r.report_digest === null) &&
    (r.accepted_revision !== 0n || r.bindings.length === 0),
  { message: 'accepted_revision 0 iff report_digest null (and no bindings)' },
);
export type ReportAcceptedBodyWire = TypeOf<typeof ReportAcceptedBody>;
