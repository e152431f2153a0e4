// The extension package and its declaration (seed 000 C-17/C-18; digest §6.12; decisions 0300, 0301): the wire
// shapes, one Schema each. `SystemComponent.spec.package` = {ref, sha256}; the artifact is one JSON package document
// {format, declaration, modules}; the declaration's header decodes all-or-nothing, each of the nine contribution
// kinds decodes on its own (src/domain/extension/declaration.ts).
import { Either, Schema } from 'effect';
import { isVersion, parseRange } from '../../domain/extension/version.js';

export const EXTENSION_ID = /^[a-z][a-z0-9-]{0,61}[a-z0-9]$/;
export const ExtensionId = Schema.String.pipe(Schema.pattern(EXTENSION_ID, { message: () => 'not an extension id' }));
export const VersionString = Schema.String.pipe(
  Schema.filter((s) => isVersion(s) || `"${s}" is not a semver version (MAJOR.MINOR.PATCH[-pre])`),
);
export const RangeString = Schema.String.pipe(
  Schema.filter((s) => {
    const r = parseRange(s);
    return Either.isRight(r) || r.left;
  }),
);
const Role = Schema.Literal('Owner', 'Member', 'Guest');
const ItemId = Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9-]{0,62}$/, { message: () => 'not an item id' }));
const Title = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200));
const Extra = Schema.Record({ key: Schema.String, value: Schema.Unknown });
const DnsSubdomain = Schema.String.pipe(
  Schema.maxLength(253),
  Schema.pattern(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
    message: () => 'not a DNS subdomain',
  }),
);

// --- SystemComponent.spec (decision 0300) --------------------------------------------------------------------
export const ComponentPackage = Schema.Struct({
  ref: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048)),
  sha256: Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/, { message: () => 'sha256 must be 64 lowercase hex' })),
});
export type ComponentPackage = typeof ComponentPackage.Type;

export const PACKAGE_FORMAT = 'kos.extension/v1';

/** The artifact: one JSON document whose exact bytes the sha256 covers. */
export const PackageDocument = Schema.Struct({
  format: Schema.Literal(PACKAGE_FORMAT),
  declaration: Schema.Unknown,
  /** ES module sources of the declared controllers, by path (decision 0305). */
  modules: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
});
export type PackageDocument = typeof PackageDocument.Type;

// --- The nine contribution kinds (decision 0301) -------------------------------------------------------------
export const CONTRIBUTION_KINDS = [
  'kinds',
  'controllers',
  'capabilities',
  'pages',
  'settings',
  'catalogueSources',
  'discoveryAdapters',
  'diagnosticAdapters',
  'preferences',
] as const;
export type ContributionKind = (typeof CONTRIBUTION_KINDS)[number];

/** A field path under `spec` naming kernel Volumes (decision 0395). */
export const VolumeRefPath = Schema.String.pipe(
  Schema.maxLength(253),
  Schema.pattern(/^spec(\.[A-Za-z][A-Za-z0-9_-]{0,62})+$/, {
    message: () => 'not a field path under spec (spec.a.b, letters, digits, _ and -)',
  }),
);

export const ObjectKindDecl = Schema.Struct({
  group: DnsSubdomain,
  version: Schema.String.pipe(Schema.pattern(/^v[1-9]\d*((alpha|beta)[1-9]\d*)?$/, { message: () => 'not a version' })),
  kind: Schema.String.pipe(Schema.pattern(/^[A-Z][A-Za-z0-9]{0,62}$/, { message: () => 'not a kind name' })),
  plural: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9]{0,62}$/, { message: () => 'not a plural' })),
  scope: Schema.optionalWith(Schema.Literal('Namespaced', 'Cluster'), { default: () => 'Namespaced' as const }),
  /** C-59: the roles that write objects of this kind through the control plane; undeclared = Owner only. */
  objectWriters: Schema.optional(Schema.Array(Role)),
  /** TC-111: on uninstall, keep (listed as a leftover) or delete this kind's objects. */
  retain: Schema.optionalWith(Schema.Literal('keep', 'delete'), { default: () => 'keep' as const }),
  /**
   * TC-107 (decision 0395): the fields of this kind's objects that reference kernel Volumes, as dot paths under
   * `spec` (`spec.volume`, `spec.mounts.volume`; arrays on the way are walked element by element). A value is a
   * Volume name in the object's own namespace, or `{name, namespace?}`. A referenced Volume is not deleted while the
   * object exists.
   */
  volumeRefs: Schema.optional(Schema.Array(VolumeRefPath)),
});
export const WriteScopeDecl = Schema.Struct({
  /** API group ('' = core). */
  group: Schema.String,
  resource: Schema.String.pipe(Schema.minLength(1)),
  /** Namespaces the scope is limited to; absent = the objects' own (cluster-wide for cluster kinds). */
  namespaces: Schema.optional(Schema.Array(Schema.String)),
  verbs: Schema.Array(Schema.Literal('create', 'update', 'delete', 'status')),
});
export const ControllerDecl = Schema.Struct({
  name: ItemId,
  /** The kind (name) of an object kind this declaration contributes. */
  kind: Schema.String,
  /** A key of the package document's `modules`. */
  module: Schema.String.pipe(Schema.minLength(1)),
  writeScope: Schema.optionalWith(Schema.Array(WriteScopeDecl), { default: () => [] }),
});
export const CapabilityDecl = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9.-]{0,62}$/, { message: () => 'not a capability name' })),
  /** Defaults to the extension's version. */
  version: Schema.optional(VersionString),
});
export const PageDecl = Schema.Struct({
  id: ItemId,
  title: Title,
  path: Schema.String.pipe(Schema.pattern(/^\/[a-z0-9/-]{0,200}$/, { message: () => 'not a page path' })),
  roles: Schema.Array(Role).pipe(Schema.minItems(1)),
  actions: Schema.optionalWith(
    Schema.Array(Schema.Struct({ id: ItemId, title: Schema.optional(Title), roles: Schema.Array(Role) })),
    { default: () => [] },
  ),
});
export const SettingDecl = Schema.Struct({
  id: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9.-]{0,126}$/, { message: () => 'not a setting id' })),
  title: Schema.optional(Title),
  scope: Schema.Literal('cluster', 'node', 'user'),
  type: Schema.Literal('string', 'number', 'boolean'),
  default: Schema.optional(Schema.Unknown),
  /** The declared writer: `user` items are edited through the settings API (when modifiable). */
  writer: Schema.Literal('user', 'extension'),
  modifiable: Schema.optionalWith(Schema.Boolean, { default: () => true }),
});
export const CatalogueSourceDecl = Schema.Struct({
  id: ItemId,
  entries: Schema.Array(Schema.extend(Schema.Struct({ id: ItemId }), Extra)),
});
export const DiscoveryAdapterDecl = Schema.extend(
  Schema.Struct({ id: ItemId, categories: Schema.Array(Schema.String).pipe(Schema.minItems(1)) }),
  Extra,
);
export const DiagnosticAdapterDecl = Schema.extend(Schema.Struct({ id: ItemId, title: Schema.optional(Title) }), Extra);
export const PreferencesDecl = Schema.Struct({
  /** C-29: retained domains survive uninstall; the default is delete. */
  retain: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  keys: Schema.Array(
    Schema.Struct({
      key: ItemId,
      type: Schema.Literal('string', 'number', 'boolean'),
      default: Schema.optional(Schema.Unknown),
    }),
  ),
});

/** The Schema of each contribution kind's value under `contributes`. */
export const CONTRIBUTION_SCHEMAS = {
  kinds: Schema.Array(ObjectKindDecl),
  controllers: Schema.Array(ControllerDecl),
  capabilities: Schema.Array(CapabilityDecl),
  pages: Schema.Array(PageDecl),
  settings: Schema.Array(SettingDecl),
  catalogueSources: Schema.Array(CatalogueSourceDecl),
  discoveryAdapters: Schema.Array(DiscoveryAdapterDecl),
  diagnosticAdapters: Schema.Array(DiagnosticAdapterDecl),
  preferences: PreferencesDecl,
} as const;

export interface Contributions {
  readonly kinds?: typeof CONTRIBUTION_SCHEMAS.kinds.Type;
  readonly controllers?: typeof CONTRIBUTION_SCHEMAS.controllers.Type;
  readonly capabilities?: typeof CONTRIBUTION_SCHEMAS.capabilities.Type;
  readonly pages?: typeof CONTRIBUTION_SCHEMAS.pages.Type;
  readonly settings?: typeof CONTRIBUTION_SCHEMAS.settings.Type;
  readonly catalogueSources?: typeof CONTRIBUTION_SCHEMAS.catalogueSources.Type;
  readonly discoveryAdapters?: typeof CONTRIBUTION_SCHEMAS.discoveryAdapters.Type;
  readonly diagnosticAdapters?: typeof CONTRIBUTION_SCHEMAS.diagnosticAdapters.Type;
  readonly preferences?: typeof CONTRIBUTION_SCHEMAS.preferences.Type;
}

/** The declaration's header: decoded all-or-nothing. `contributes` is only checked for its keys here. */
export const DeclarationHeader = Schema.Struct({
  id: ExtensionId,
  version: VersionString,
  /** The target framework version (a range the running framework version must satisfy). */
  framework: RangeString,
  dependencies: Schema.optionalWith(
    Schema.Struct({
      capabilities: Schema.optionalWith(
        Schema.Array(Schema.Struct({ name: Schema.String.pipe(Schema.minLength(1)), range: RangeString })),
        { default: () => [] },
      ),
      components: Schema.optionalWith(Schema.Array(Schema.Struct({ id: ExtensionId, range: RangeString })), {
        default: () => [],
      }),
    }),
    { default: () => ({ capabilities: [], components: [] }) },
  ),
  contributes: Schema.optionalWith(
    Schema.Struct(
      Object.fromEntries(CONTRIBUTION_KINDS.map((k) => [k, Schema.optional(Schema.Unknown)])) as {
        [K in ContributionKind]: Schema.optional<typeof Schema.Unknown>;
      },
    ),
    { default: () => ({}), exact: true },
  ),
});
export type DeclarationHeader = typeof DeclarationHeader.Type;
