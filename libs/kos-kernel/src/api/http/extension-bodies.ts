// The wire shapes of the extension surfaces (decisions 0344, 0345): the pages a role sees, the settings projection,
// a setting write and its answer. One Schema each; /api/v1/openapi.json is generated from them.
import { Schema } from 'effect';

const Source = Schema.Struct({ extension: Schema.String, version: Schema.String, component: Schema.String });

export const PageView = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  path: Schema.String,
  source: Source,
  /** The page's declared actions this role may take. */
  actions: Schema.Array(Schema.Struct({ id: Schema.String, title: Schema.optional(Schema.String) })),
});
export const PageList = Schema.Struct({ items: Schema.Array(PageView) });

export const SettingView = Schema.Struct({
  id: Schema.String,
  title: Schema.optional(Schema.String),
  scope: Schema.Literal('cluster', 'node', 'user'),
  type: Schema.Literal('string', 'number', 'boolean'),
  /** The stored value, else the declared default, else null. */
  value: Schema.Unknown,
  valueFrom: Schema.Literal('set', 'default', 'unset'),
  /** The declared writer. */
  writer: Schema.Literal('user', 'extension'),
  node: Schema.optional(Schema.String),
  source: Source,
  /** The modification entry, when the caller may write the item. */
  edit: Schema.optional(Schema.Struct({ method: Schema.Literal('PUT'), path: Schema.String })),
  /** Why there is no entry. */
  notModifiable: Schema.optional(Schema.String),
});
export const SettingList = Schema.Struct({ items: Schema.Array(SettingView) });

/** `PUT /api/v1/settings/{id}`: the value (of the declared type) and, for a node item, its node. */
export const SettingPut = Schema.Struct({ value: Schema.Unknown, node: Schema.optional(Schema.String) });
export const SettingWritten = Schema.Struct({ accepted: Schema.Literal(true), setting: SettingView });
