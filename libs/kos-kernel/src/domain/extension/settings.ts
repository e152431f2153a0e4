// The settings domain (seed 000 C-23: "pkg/settings把已激活组件声明的设置项投影成当前值、来源（声明的写者）、修改入口与不可修改
// 原因。写者不是用户或未声明可修改的项没有入口，写入返回invalid_field并说明原因；用户写入的项按作用域（集群、节点、用户）
// 取值，节点级项必须带node且节点名须是 DNS 子域，用户级项只读写调用者自己的值。设置项随组件出现与消失，值在停用期间保留";
// digest §6.12 disable; decision 0345). Pure: the items come from the Registry (activated components only), the stored
// values are a parameter; nothing here reads a store.
import type { SettingDecl } from '../../api/extension/declaration.js';
import type { SettingView as SettingViewSchema } from '../../api/http/extension-bodies.js';
import { isObjectName } from '../control-plane/requests.js';
import type { Role } from '../identity/rules.js';
import type { Sourced } from './registry.js';

export type SettingItem = Sourced<typeof SettingDecl.Type>;

/** Where one value is kept: a cluster item (node ''), a node item (its node), a user item (the account). */
export interface SettingKey {
  readonly id: string;
  readonly node: string;
  readonly account?: string;
}

/** One item as a caller sees it (the wire shape, api/http/extension-bodies.ts). */
export type SettingView = typeof SettingViewSchema.Type;

/** Why `role` may not write `item` through the API (undefined = it may). Guests read only (C-59). */
export const settingWriteRefusal = (item: SettingItem, role: Role): string | undefined => {
  if (item.writer !== 'user') return `${item.id} is written by the extension ${item.source.extension}, not by users`;
  if (!item.modifiable) return `${item.id} is declared not modifiable`;
  if (role === 'Guest') return 'a Guest is read-only';
  if (item.scope !== 'user' && role !== 'Owner')
    return `${item.id} is a ${item.scope} setting: only an Owner writes it`;
  return undefined;
};

/** The refusals that come from the declaration alone (answered `invalid_field`); a role refusal is `forbidden`. */
export const isDeclarationRefusal = (item: SettingItem): boolean => item.writer !== 'user' || !item.modifiable;

/** The key of the value a caller reads or writes: node items need a node (a DNS subdomain), user items are the caller's. */
export const settingKeyOf = (
  item: SettingItem,
  caller: { readonly account: string; readonly node?: string },
): { readonly key: SettingKey } | { readonly problem: string } => {
  if (item.scope === 'node') {
    if (caller.node === undefined || caller.node === '')
      return { problem: `${item.id} is a node setting: name the node` };
    if (!isObjectName(caller.node)) return { problem: `node "${caller.node}" is not a DNS subdomain` };
    return { key: { id: item.id, node: caller.node } };
  }
  if (caller.node !== undefined && caller.node !== '')
    return { problem: `${item.id} is a ${item.scope} setting: it takes no node` };
  return item.scope === 'user'
    ? { key: { id: item.id, node: '', account: caller.account } }
    : { key: { id: item.id, node: '' } };
};

/** The value problem for the declared type (undefined = acceptable). */
export const settingValueProblem = (item: SettingItem, value: unknown): string | undefined => {
  if (value === undefined) return 'value is required';
  const ok =
    item.type === 'number'
      ? typeof value === 'number' && Number.isFinite(value)
      : item.type === 'boolean'
        ? typeof value === 'boolean'
        : typeof value === 'string' && value.length <= 4096;
  return ok
    ? undefined
    : `${item.id} takes a ${item.type}${item.type === 'string' ? ' (at most 4096 characters)' : ''}`;
};

/** One item as a caller sees it; `stored` = the value kept under its key (undefined when none). */
export const settingView = (
  item: SettingItem,
  caller: { readonly account: string; readonly role: Role; readonly node?: string },
  stored: { readonly found: true; readonly value: unknown } | undefined,
): SettingView => {
  const refusal = settingWriteRefusal(item, caller.role);
  const value = stored !== undefined ? stored.value : item.default !== undefined ? item.default : null;
  return {
    id: item.id,
    ...(item.title !== undefined ? { title: item.title } : {}),
    scope: item.scope,
    type: item.type,
    value,
    valueFrom: stored !== undefined ? 'set' : item.default !== undefined ? 'default' : 'unset',
    writer: item.writer,
    ...(item.scope === 'node' && caller.node !== undefined && caller.node !== '' ? { node: caller.node } : {}),
    source: item.source,
    ...(refusal === undefined
      ? { edit: { method: 'PUT' as const, path: `/api/v1/settings/${encodeURIComponent(item.id)}` } }
      : { notModifiable: refusal }),
  };
};
