// Extension pages, settings and object writes through the control plane of a real controller (issue 23; decisions
// 0344, 0345): the identity module on a real SQLite file, `--extension-dir` at the repository's sample packages, the
// test bed's kube-apiserver. kos-notes (objectWriters Owner, Member) and acme-inventory (no objectWriters: Owner
// only) are installed by the controller's own component reconciler. Before install nothing of them is visible or
// writable (TC-5); writes of their objects follow the roles of the declaration and the write path (TC-34); disabling
// kos-notes withdraws its pages and settings, rejects their interface, stops its controllers' sandboxed processes,
// and keeps the setting values and objects, which come back on re-enable (TC-110, TC-8).
import { readdirSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, useNamespace } from '@homelab/testbed/vitest';
import { type Bootstrap, markerKey, openControlPlaneDatabase } from '@homelab/kos-kernel';
import type { ControllerHandle } from '../src/index.js';
import { ACME, eventually, extensionsDir, NOTES, useSampleComponents } from './extension-support.js';
import { type Answer, auditTrail, call, identityCalls, prepareCluster, startTestController } from './support.js';

const run = randomBytes(4).toString('hex');
const LABEL = 'test.kos.tsic.top/ctrl-extension-routes';
const NOTES_API = 'notes.kos.tsic.top/v1alpha1';
const ITEMS_API = 'inventory.acme.example/v1';
const SETTING = 'kos-notes.retention-days';
const ns = useNamespace('ext-routes');
const dir = mkdtempSync(join(tmpdir(), 'kos-ext-routes-'));
const dbFile = join(dir, 'controlplane.db');
const PASSWORD = 'correct horse battery staple';
const names = { notes: `notes-${run}`, acme: `acme-${run}` };

let cp: ControllerHandle;
let boot: Bootstrap | undefined;
const { as, session, createAccount } = identityCalls(() => cp.url, PASSWORD);
const tokens = { owner: '', member: '', other: '', guest: '' };
const code = (a: Answer) => (a.body as { error?: { code?: string } }).error?.code;
const samples = useSampleComponents(LABEL, run);
const { auditSince, lastSeq } = auditTrail(as, () => tokens.owner);
const notePath = (name: string) =>
  `/api/v1/resources/notes/${name}?namespace=${ns.name}&apiVersion=${encodeURIComponent(NOTES_API)}`;
const versionOf = async (plural: string, api: string, name: string) =>
  ((await stored(plural, api, name)).json() as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
const ownerOf = async (name: string) =>
  ((await stored('notes', NOTES_API, name)).json() as { spec: { owner?: string } }).spec.owner;

const note = (name: string, spec: Record<string, unknown> = { text: name }, extra: Record<string, unknown> = {}) => ({
  apiVersion: NOTES_API,
  kind: 'Note',
  metadata: { name, namespace: ns.name, ...extra },
  spec,
});
const stored = async (plural: string, api: string, name: string) =>
  kubeRequest('GET', `/apis/${api}/namespaces/${ns.name}/${plural}/${name}`);
const phase = samples.phase;
const setDisabled = (disable: boolean) => samples.setDisabled(names.notes, disable);

/** The extension sandboxes this process runs (decision 0342): node children under the permission model. */
const sandboxes = () =>
  readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        const args = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
        return ppid === process.pid && args.includes('--input-type=module') && args.some((a) => /permission$/.test(a));
      } catch {
        return false; // exited meanwhile
      }
    });

const install = async (name: string, file: string) => {
  const r = await samples.install(name, file);
  expect(r.status, r.body).toBe(201);
};

beforeAll(async () => {
  await prepareCluster();
  cp = await startTestController(
    { identityDb: dbFile, extensionDir: extensionsDir, kosLabelSelector: `${LABEL}=${run}` },
    { onBootstrap: (b) => (boot = b) },
  );
  if (boot === undefined) throw new Error('the first start created no Owner');
  tokens.owner = await session(boot.name, boot.oneTimePassword);
  tokens.member = await createAccount(tokens.owner, 'mia', 'Member');
  tokens.other = await createAccount(tokens.owner, 'max', 'Member');
  tokens.guest = await createAccount(tokens.owner, 'gil', 'Guest');
}, 120_000);

afterAll(async () => {
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('extension surfaces through the control plane', () => {
  it('TC-5: before install, no page, no setting and no kind of the extension; its interface is capability_missing', async () => {
    expect((await as(tokens.owner, 'GET', '/api/v1/pages')).body).toEqual({ items: [] });
    expect((await as(tokens.owner, 'GET', '/api/v1/settings')).body).toEqual({ items: [] });
    const put = await as(tokens.owner, 'PUT', `/api/v1/settings/${SETTING}`, { value: 45 });
    expect([put.status, code(put)]).toEqual([422, 'capability_missing']);
    const post = await as(tokens.owner, 'POST', '/api/v1/resources/notes', note('early'));
    expect([post.status, code(post)]).toEqual([422, 'capability_missing']);
    // without credentials: refused before anything is said about the kind
    const anonymous = await call(cp.url, 'POST', '/api/v1/resources/notes', note('early'));
    expect([anonymous.status, code(anonymous)]).toEqual([401, 'unauthenticated']);
    expect((await call(cp.url, 'GET', '/api/v1/pages')).status).toBe(401);
  });

  it('C-14: a write of an extension kind no component serves is audited once (handler, not again by the router)', async () => {
    const before = await lastSeq();
    const unserved = await as(tokens.member, 'DELETE', notePath('never'), undefined, { 'if-match': '"1"' });
    expect([unserved.status, code(unserved)]).toEqual([422, 'capability_missing']);
    const records = await auditSince(before);
    expect(records.map((r) => [r.actor, r.verb, r.result, r.code])).toEqual([
      ['mia', 'delete', 'rejected', 'capability_missing'],
    ]);
    // a kernel kind that does not exist: one record as well
    const next = await lastSeq();
    const unknown = await as(tokens.member, 'DELETE', `/api/v1/resources/Gadget/x?namespace=${ns.name}`, undefined, {
      'if-match': '"1"',
    });
    expect([unknown.status, code(unknown)]).toEqual([422, 'capability_missing']);
    expect((await auditSince(next)).map((r) => [r.verb, r.result, r.code])).toEqual([
      ['delete', 'rejected', 'capability_missing'],
    ]);
  });

  it('TC-5: installed and activated, pages appear per role with their declared source and settings with their current value', async () => {
    await install(names.notes, NOTES);
    await eventually('kos-notes is Active', async () => (await phase(names.notes)) === 'Active');
    await install(names.acme, ACME);
    await eventually('acme-inventory is Active', async () => (await phase(names.acme)) === 'Active');
    await eventually('both kinds serve in the API server', async () => {
      const a = await kubeRequest('GET', `/apis/${NOTES_API}/namespaces/${ns.name}/notes`);
      const b = await kubeRequest('GET', `/apis/${ITEMS_API}/namespaces/${ns.name}/items`);
      return a.status === 200 && b.status === 200;
    });
    const pages = async (token: string) =>
      (
        (await as(token, 'GET', '/api/v1/pages')).body as {
          items: Array<{
            id: string;
            source: { extension: string; component: string };
            actions: Array<{ id: string }>;
          }>;
        }
      ).items.filter((p) => p.source.extension === 'kos-notes');
    const owner = await pages(tokens.owner);
    expect(owner.map((p) => [p.id, p.actions.map((a) => a.id)])).toEqual([
      ['notes', []],
      ['notes-admin', ['reindex']],
    ]);
    expect(owner[0]?.source.component).toBe(names.notes);
    expect((await pages(tokens.member)).map((p) => p.id)).toEqual(['notes']);
    expect((await pages(tokens.guest)).map((p) => p.id)).toEqual(['notes']);
    const settings = (await as(tokens.owner, 'GET', '/api/v1/settings')).body as {
      items: Array<{ id: string; value: unknown; valueFrom: string; edit?: unknown; source: { extension: string } }>;
    };
    expect(settings.items.find((s) => s.id === SETTING)).toMatchObject({
      value: 30,
      valueFrom: 'default',
      edit: { method: 'PUT', path: `/api/v1/settings/${SETTING}` },
      source: { extension: 'kos-notes' },
    });
    const asMember = (await as(tokens.member, 'GET', '/api/v1/settings')).body as {
      items: Array<{ id: string; edit?: unknown; notModifiable?: string }>;
    };
    expect(asMember.items.find((s) => s.id === SETTING)?.notModifiable).toMatch(/only an Owner/);
  });

  it('TC-34: extension objects are written by the roles their declaration names, through the write path', async () => {
    // kos-notes declares objectWriters [Owner, Member]: a Guest is refused, a Member writes
    const byGuest = await as(tokens.guest, 'POST', '/api/v1/resources/notes', note('by-guest'));
    expect([byGuest.status, code(byGuest)]).toEqual([403, 'forbidden']);
    expect((await stored('notes', NOTES_API, 'by-guest')).status).toBe(404);
    const created = await as(tokens.member, 'POST', '/api/v1/resources/notes', note('by-member'));
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    expect(created.headers.get('location')).toBe(
      `/api/v1/resources/Note/by-member?namespace=${ns.name}&apiVersion=${encodeURIComponent(NOTES_API)}`,
    );
    // note-indexer writes the status once (a new resourceVersion): read the version after it
    await eventually('note-indexer indexed the new Note', async () => {
      const r = (await stored('notes', NOTES_API, 'by-member')).json() as { status?: { indexed?: boolean } };
      return r.status?.indexed === true;
    });
    const first = (await stored('notes', NOTES_API, 'by-member')).json() as {
      metadata: { resourceVersion: string; managedFields: Array<{ manager: string }> };
      spec: unknown;
    };
    // the owner comes from the session, as for the kernel's owned kinds (decision 0390)
    expect(first.spec).toEqual({ text: 'by-member', owner: 'mia' });
    expect(first.metadata.managedFields.map((f) => f.manager)).toContain('kos-user/mia');
    // the same request again converges; a different desired state is object_exists
    expect((await as(tokens.member, 'POST', '/api/v1/resources/notes', note('by-member'))).status).toBe(202);
    const differs = await as(tokens.member, 'POST', '/api/v1/resources/notes', note('by-member', { text: 'other' }));
    expect([differs.status, code(differs)]).toEqual([409, 'object_exists']);
    // the write path: markers and status are not the user's; updates need the version read (C-05)
    const marker = await as(
      tokens.member,
      'POST',
      '/api/v1/resources/notes',
      note('marked', { text: 'x' }, { labels: { [markerKey('managed-by')]: 'kos' } }),
    );
    expect([marker.status, code(marker)]).toEqual([403, 'forbidden']);
    const status = await as(tokens.member, 'POST', '/api/v1/resources/notes', {
      ...note('st'),
      status: { indexed: true },
    });
    expect([status.status, code(status)]).toEqual([400, 'invalid_field']);
    const path = `/api/v1/resources/notes/by-member?namespace=${ns.name}&apiVersion=${encodeURIComponent(NOTES_API)}`;
    const noVersion = await as(tokens.member, 'PUT', path, note('by-member', { text: 'edited' }));
    expect([noVersion.status, code(noVersion)]).toEqual([428, 'precondition_required']);
    const updated = await as(tokens.member, 'PUT', path, note('by-member', { text: 'edited' }), {
      'if-match': `"${first.metadata.resourceVersion}"`,
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(202);
    expect(((await stored('notes', NOTES_API, 'by-member')).json() as { spec: unknown }).spec).toEqual({
      text: 'edited',
      owner: 'mia',
    });
    const stale = await as(tokens.member, 'PUT', path, note('by-member', { text: 'stale' }), {
      'if-match': `"${first.metadata.resourceVersion}"`,
    });
    expect([stale.status, code(stale)]).toEqual([409, 'conflict']);
    const guestDelete = await as(tokens.guest, 'DELETE', path, undefined, { 'if-match': '"1"' });
    expect([guestDelete.status, code(guestDelete)]).toEqual([403, 'forbidden']);
    // acme-inventory declares no objectWriters: only an Owner writes its Items
    const item = { apiVersion: ITEMS_API, kind: 'Item', metadata: { name: 'box', namespace: ns.name }, spec: { n: 1 } };
    const memberItem = await as(tokens.member, 'POST', '/api/v1/resources/items', item);
    expect([memberItem.status, code(memberItem)]).toEqual([403, 'forbidden']);
    expect((await as(tokens.owner, 'POST', '/api/v1/resources/items', item)).status).toBe(202);
    expect((await stored('items', ITEMS_API, 'box')).status).toBe(200);
    // every attempt is in the audit stream with the extension id; the refused Guest write too
    const audit = (await as(tokens.owner, 'GET', '/api/v1/audit?limit=200')).body as {
      items: Array<{ actor: string; verb: string; result: string; extensionId?: string; object?: { name?: string } }>;
    };
    expect(
      audit.items.find((r) => r.actor === 'gil' && r.object?.name === 'by-guest' && r.result === 'rejected')
        ?.extensionId,
    ).toBe('kos-notes');
    expect(audit.items.find((r) => r.actor === 'owner' && r.object?.name === 'box')?.extensionId).toBe(
      'acme-inventory',
    );
  });

  it('TC-34/TC-31/TC-33: extension objects have owners: a Member changes and deletes only its own, an Owner all', async () => {
    // mia's Note (created above): max, a Member too, may neither change nor delete it
    const before = await lastSeq();
    const version = await versionOf('notes', NOTES_API, 'by-member');
    const change = await as(tokens.other, 'PUT', notePath('by-member'), note('by-member', { text: 'max was here' }), {
      'if-match': `"${version}"`,
    });
    expect([change.status, code(change)]).toEqual([403, 'forbidden']);
    const remove = await as(tokens.other, 'DELETE', notePath('by-member'), undefined, { 'if-match': `"${version}"` });
    expect([remove.status, code(remove)]).toEqual([403, 'forbidden']);
    expect(await versionOf('notes', NOTES_API, 'by-member')).toBe(version);
    // (the extension's own controllers may write meanwhile: only max's records are counted)
    const maxRecords = (await auditSince(before)).filter((r) => r.actor === 'max');
    expect(maxRecords.map((r) => [r.actor, r.verb, r.result, r.code, r.extensionId])).toEqual([
      ['max', 'delete', 'rejected', 'forbidden', 'kos-notes'],
      ['max', 'update', 'rejected', 'forbidden', 'kos-notes'],
    ]);
    // nor take it over (naming himself as owner), nor create a Note in mia's name
    const takeOver = await as(
      tokens.other,
      'PUT',
      notePath('by-member'),
      note('by-member', { text: 'edited', owner: 'max' }),
      { 'if-match': `"${version}"` },
    );
    expect([takeOver.status, code(takeOver)]).toEqual([403, 'forbidden']);
    const forged = await as(
      tokens.other,
      'POST',
      '/api/v1/resources/notes',
      note('forged', { text: 'x', owner: 'mia' }),
    );
    expect([forged.status, code(forged)]).toEqual([400, 'invalid_field']);
    expect((await stored('notes', NOTES_API, 'forged')).status).toBe(404);
    // max's own Note: his to change
    expect((await as(tokens.other, 'POST', '/api/v1/resources/notes', note('by-max'))).status).toBe(202);
    expect(await ownerOf('by-max')).toBe('max');
    await eventually('note-indexer indexed by-max', async () => {
      const r = (await stored('notes', NOTES_API, 'by-max')).json() as { status?: { indexed?: boolean } };
      return r.status?.indexed === true;
    });
    const own = await as(tokens.other, 'PUT', notePath('by-max'), note('by-max', { text: 'mine' }), {
      'if-match': `"${await versionOf('notes', NOTES_API, 'by-max')}"`,
    });
    expect(own.status, JSON.stringify(own.body)).toBe(202);
    // the Owner changes anyone's Note (the owner stays), and transfers it: then the previous owner is refused
    const byOwner = await as(tokens.owner, 'PUT', notePath('by-max'), note('by-max', { text: 'tidied' }), {
      'if-match': `"${await versionOf('notes', NOTES_API, 'by-max')}"`,
    });
    expect(byOwner.status, JSON.stringify(byOwner.body)).toBe(202);
    expect(((await stored('notes', NOTES_API, 'by-max')).json() as { spec: unknown }).spec).toEqual({
      text: 'tidied',
      owner: 'max',
    });
    const transfer = await as(
      tokens.owner,
      'PUT',
      notePath('by-max'),
      note('by-max', { text: 'tidied', owner: 'mia' }),
      {
        'if-match': `"${await versionOf('notes', NOTES_API, 'by-max')}"`,
      },
    );
    expect(transfer.status, JSON.stringify(transfer.body)).toBe(202);
    expect(await ownerOf('by-max')).toBe('mia');
    const lost = await as(tokens.other, 'DELETE', notePath('by-max'), undefined, {
      'if-match': `"${await versionOf('notes', NOTES_API, 'by-max')}"`,
    });
    expect([lost.status, code(lost)]).toEqual([403, 'forbidden']);
    const deleted = await as(tokens.owner, 'DELETE', notePath('by-max'), undefined, {
      'if-match': `"${await versionOf('notes', NOTES_API, 'by-max')}"`,
    });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(202);
    await eventually('by-max is gone', async () => (await stored('notes', NOTES_API, 'by-max')).status === 404);
  });

  it('TC-31/TC-107: a Note naming another owner’s Volume in its declared volumeRefs is refused at create and update; its own is fine', async () => {
    const volume = (name: string) => ({ kind: 'Volume', metadata: { name, namespace: ns.name }, spec: {} });
    expect((await as(tokens.other, 'POST', '/api/v1/resources/Volume', volume('max-data'))).status).toBe(202);
    expect((await as(tokens.member, 'POST', '/api/v1/resources/Volume', volume('mia-data'))).status).toBe(202);
    // kos-notes declares `volumeRefs: ["spec.volume"]`: a string is a Volume of the Note's namespace
    const foreign = await as(
      tokens.member,
      'POST',
      '/api/v1/resources/notes',
      note('mia-on-max', { text: 'x', volume: 'max-data' }),
    );
    expect([foreign.status, code(foreign)]).toEqual([400, 'invalid_field']);
    expect((foreign.body as { error: { causes?: unknown } }).error.causes).toEqual([
      { field: 'spec.volume', message: 'refers to another owner’s object' },
    ]);
    expect((await stored('notes', NOTES_API, 'mia-on-max')).status).toBe(404);
    // the `{name, namespace}` form is checked the same way
    const qualified = await as(
      tokens.member,
      'POST',
      '/api/v1/resources/notes',
      note('mia-on-max-2', { text: 'x', volume: { name: 'max-data', namespace: ns.name } }),
    );
    expect([qualified.status, code(qualified)]).toEqual([400, 'invalid_field']);
    // her own Volume, and one not created yet, are fine
    const own = await as(
      tokens.member,
      'POST',
      '/api/v1/resources/notes',
      note('mia-on-own', { text: 'x', volume: 'mia-data' }),
    );
    expect(own.status, JSON.stringify(own.body)).toBe(202);
    const later = await as(
      tokens.member,
      'POST',
      '/api/v1/resources/notes',
      note('mia-on-later', { text: 'x', volume: 'not-there-yet' }),
    );
    expect(later.status, JSON.stringify(later.body)).toBe(202);
    // note-indexer writes its status once (a new resourceVersion): read the version after it
    await eventually('note-indexer indexed mia-on-own', async () => {
      const r = (await stored('notes', NOTES_API, 'mia-on-own')).json() as { status?: { indexed?: boolean } };
      return r.status?.indexed === true;
    });
    // an update to max's Volume is refused, whoever writes it (the Owner too): the reference is across owners
    for (const token of [tokens.member, tokens.owner]) {
      const changed = await as(
        token,
        'PUT',
        notePath('mia-on-own'),
        note('mia-on-own', { text: 'x', volume: 'max-data' }),
        { 'if-match': `"${await versionOf('notes', NOTES_API, 'mia-on-own')}"` },
      );
      expect([changed.status, code(changed)]).toEqual([400, 'invalid_field']);
    }
    expect(((await stored('notes', NOTES_API, 'mia-on-own')).json() as { spec: unknown }).spec).toEqual({
      text: 'x',
      volume: 'mia-data',
      owner: 'mia',
    });
  });

  it('TC-34: a Member deletes a Note at the version it read', async () => {
    const path = `/api/v1/resources/notes/by-member?namespace=${ns.name}&apiVersion=${encodeURIComponent(NOTES_API)}`;
    const version = (
      (await stored('notes', NOTES_API, 'by-member')).json() as { metadata: { resourceVersion: string } }
    ).metadata.resourceVersion;
    const deleted = await as(tokens.member, 'DELETE', path, undefined, { 'if-match': `"${version}"` });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(202);
    await eventually('the Note is gone', async () => (await stored('notes', NOTES_API, 'by-member')).status === 404);
  });

  it('TC-110/TC-8: disabled, pages and settings disappear, their interface is rejected, the controllers stop; values and objects are kept and come back on re-enable', async () => {
    const put = await as(tokens.owner, 'PUT', `/api/v1/settings/${SETTING}`, { value: 45 });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const byMember = await as(tokens.member, 'PUT', `/api/v1/settings/${SETTING}`, { value: 1 });
    expect([byMember.status, code(byMember)]).toEqual([403, 'forbidden']);
    const wrongType = await as(tokens.owner, 'PUT', `/api/v1/settings/${SETTING}`, { value: '45' });
    expect([wrongType.status, code(wrongType)]).toEqual([400, 'invalid_field']);
    // the controllers run: kos-notes' note-indexer and acme's item-sync, each in its own sandboxed process
    const kept = await as(tokens.owner, 'POST', '/api/v1/resources/notes', note('kept'));
    expect(kept.status).toBe(202);
    await eventually('note-indexer indexed the Note', async () => {
      const r = (await stored('notes', NOTES_API, 'kept')).json() as { status?: { indexed?: boolean } };
      return r.status?.indexed === true;
    });
    await eventually('both controllers run in their sandboxes', async () => sandboxes().length === 2);

    expect((await setDisabled(true)).status).toBe(200);
    await eventually('kos-notes is Disabled', async () => (await phase(names.notes)) === 'Disabled');
    // acme-inventory depends on kos-notes: it is no longer activated either
    await eventually('acme-inventory is Pending', async () => (await phase(names.acme)) === 'Pending');
    await eventually('the settings are withdrawn', async () => {
      const s = (await as(tokens.owner, 'GET', '/api/v1/settings')).body as { items: Array<{ id: string }> };
      return !s.items.some((i) => i.id === SETTING);
    });
    expect(
      ((await as(tokens.owner, 'GET', '/api/v1/pages')).body as { items: Array<{ source: { extension: string } }> })
        .items,
    ).toEqual([]);
    const rejected = await as(tokens.owner, 'PUT', `/api/v1/settings/${SETTING}`, { value: 50 });
    expect([rejected.status, code(rejected)]).toEqual([422, 'capability_missing']);
    const write = await as(tokens.owner, 'POST', '/api/v1/resources/notes', note('while-disabled'));
    expect([write.status, code(write)]).toEqual([422, 'capability_missing']);
    // the controllers are stopped: their processes exit, and a Note written meanwhile is not reconciled
    await eventually('the sandboxed controller processes exited', async () => sandboxes().length === 0);
    const meanwhile = await kubeRequest('POST', `/apis/${NOTES_API}/namespaces/${ns.name}/notes`, note('meanwhile'));
    expect(meanwhile.status).toBe(201);
    // the value is kept in the control-plane database while the item is withdrawn
    const db = openControlPlaneDatabase(dbFile, { fileMustExist: true, readonly: true });
    try {
      expect(db.prepare('SELECT value FROM setting_values WHERE id = ?').get(SETTING)).toEqual({ value: '45' });
    } finally {
      db.close();
    }
    expect((await stored('notes', NOTES_API, 'kept')).status).toBe(200);
    expect(((await stored('notes', NOTES_API, 'meanwhile')).json() as { status?: unknown }).status).toBeUndefined();

    expect((await setDisabled(false)).status).toBe(200);
    await eventually('kos-notes is Active again', async () => (await phase(names.notes)) === 'Active');
    await eventually('the setting is back with its value', async () => {
      const s = (await as(tokens.owner, 'GET', '/api/v1/settings')).body as {
        items: Array<{ id: string; value: unknown; valueFrom: string }>;
      };
      const item = s.items.find((i) => i.id === SETTING);
      return item?.value === 45 && item.valueFrom === 'set';
    });
    expect(
      ((await as(tokens.owner, 'GET', '/api/v1/pages')).body as { items: Array<{ id: string }> }).items.map(
        (p) => p.id,
      ),
    ).toContain('notes-admin');
    await eventually('the restarted note-indexer reconciles the Note written while it was stopped', async () => {
      const r = (await stored('notes', NOTES_API, 'meanwhile')).json() as { status?: { indexed?: boolean } };
      return r.status?.indexed === true;
    });
    await eventually('both sandboxes run again', async () => sandboxes().length === 2);
  });
});
