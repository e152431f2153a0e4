import { Either } from 'effect';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toHex } from '../src/domain/bytes.js';
import {
  type Declaration,
  declarationFromLocal,
  parseBackendHost,
  sortDeclarations,
  validateDeclaration,
} from '../src/domain/declaration.js';
import { parseId16, ulidText, uuidText } from '../src/domain/ids.js';
import { type ServiceRow, applyReport, ulid } from '../src/domain/services.js';
import { errCode, id16, ok } from './helpers.js';

const decl = (key: string, over: Partial<Declaration> = {}): Declaration => ({
  declarationKey: key,
  displayName: null,
  description: null,
  enabled: true,
  protocols: ['tcp'],
  backendHost: { ipv4: new Uint8Array([127, 0, 0, 1]) },
  backendPort: 8080n,
  portMode: 'auto',
  requestedPort: null,
  ...over,
});

describe('declarations from the local source', () => {
  it('M6-22 Host/SNI, public domain and gateway/tunnel requirements → unsupported-field (never dropped)', () => {
    const base = { key: 'web', protocols: ['https'], backend_host: '127.0.0.1', backend_port: 443 };
    for (const k of ['host_header', 'sni', 'public_domain', 'gateway', 'tunnel', 'role', 'host', 'tls'])
      expect(errCode(declarationFromLocal({ ...base, [k]: 'x' })), k).toBe('unsupported-field');
    expect(errCode(declarationFromLocal({ ...base, colour: 'blue' }))).toBe('unsupported-field');
    expect(errCode(declarationFromLocal({ ...base, protocols: ['quic'] }))).toBe('unsupported-field');
  });

  it('M6-22 HTTP/HTTPS declarations map to TCP backend semantics only', () => {
    const d = ok(
      declarationFromLocal({
        key: 'web',
        protocols: ['http', 'https', 'udp'],
        backend_host: 'Backend.LAN.',
        backend_port: 80,
      }),
    );
    expect(d.protocols).toEqual(['tcp', 'udp']);
    expect(d.backendHost).toEqual({ dns: 'backend.lan' });
    expect(d.portMode).toBe('auto');
    expect(d.requestedPort).toBeNull();
  });

  it('M6-22 fixed with requested_port 0/null, or auto with a value, is refused', () => {
    const base = { key: 'db', protocols: ['tcp'], backend_host: '10.0.0.2', backend_port: 5432 };
    expect(errCode(declarationFromLocal({ ...base, port_mode: 'fixed' }))).toBe('invalid-encoding');
    expect(errCode(declarationFromLocal({ ...base, port_mode: 'fixed', requested_port: 0 }))).toBe('invalid-encoding');
    expect(errCode(declarationFromLocal({ ...base, port_mode: 'fixed', requested_port: 70000 }))).toBe(
      'invalid-encoding',
    );
    expect(errCode(declarationFromLocal({ ...base, port_mode: 'auto', requested_port: 40001 }))).toBe(
      'invalid-encoding',
    );
    expect(ok(declarationFromLocal({ ...base, port_mode: 'fixed', requested_port: 45432 })).requestedPort).toBe(45432n);
    expect(errCode(validateDeclaration(decl('x', { portMode: 'fixed', requestedPort: 0n })))).toBe('invalid-encoding');
    expect(errCode(validateDeclaration(decl('x', { portMode: 'auto', requestedPort: 5n })))).toBe('invalid-encoding');
  });

  it('validates protocols as a sorted non-empty set, backend hosts and ports', () => {
    expect(errCode(validateDeclaration(decl('x', { protocols: [] })))).toBe('invalid-encoding');
    expect(errCode(validateDeclaration(decl('x', { protocols: ['udp', 'tcp'] })))).toBe('invalid-encoding');
    expect(errCode(validateDeclaration(decl('x', { protocols: ['tcp', 'tcp'] })))).toBe('invalid-encoding');
    expect(errCode(validateDeclaration(decl('x', { backendPort: 0n })))).toBe('invalid-encoding');
    expect(errCode(validateDeclaration(decl('x', { backendHost: { dns: 'Upper.case' } })))).toBe('invalid-encoding');
    expect(errCode(validateDeclaration(decl('x', { backendHost: { dns: '-bad.lan' } })))).toBe('invalid-encoding');
    expect(errCode(validateDeclaration(decl('x', { backendHost: { ipv4: new Uint8Array(5) } })))).toBe(
      'invalid-encoding',
    );
    expect(toHex((ok(parseBackendHost('::1')) as { ipv6: Uint8Array }).ipv6)).toBe('0'.repeat(31) + '1');
    expect(toHex((ok(parseBackendHost('[fe80::1:2]')) as { ipv6: Uint8Array }).ipv6)).toBe(
      'fe800000000000000000000000010002',
    );
    expect(toHex((ok(parseBackendHost('::ffff:10.0.0.1')) as { ipv6: Uint8Array }).ipv6)).toBe(
      '00000000000000000000ffff0a000001',
    );
    expect(Either.isLeft(parseBackendHost('1::2::3'))).toBe(true);
    expect(Either.isLeft(parseBackendHost('256.1.1.1.'))).toBe(false); // not an IPv4 literal: a (canonical) DNS name
    expect(errCode(sortDeclarations([decl('b'), decl('a'), decl('b')]))).toBe('invalid-encoding');
    expect(ok(sortDeclarations([decl('b'), decl('é'), decl('a')])).map((d) => d.declarationKey)).toEqual([
      'a',
      'b',
      'é',
    ]);
  });
});

describe('identifiers', () => {
  it('M6-7 ULID and UUID text of the same 16 bytes map to the same scope', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (b) => {
        const fromUuid = parseId16(uuidText(b));
        const fromUlid = parseId16(ulidText(b));
        expect(fromUuid).toEqual(b);
        expect(fromUlid).toEqual(b);
      }),
    );
    expect(parseId16('0190F3A0-B1C2-D3E4-F506-1728394A5B6C')).toBeNull(); // not canonical lowercase
    expect(parseId16('0190f3a0b1c2d3e4f5061728394a5b6c')).toBeNull();
  });

  it('a Service ULID is 48-bit ms + 80 random bits', () => {
    const u = ulid(0x0190f3a0b1c2, new Uint8Array(10).fill(0xab));
    expect(toHex(u)).toBe('0190f3a0b1c2' + 'ab'.repeat(10));
  });
});

describe('B: services of a report', () => {
  let n = 0;
  const fresh = () => id16(++n);

  it('M6-19 a display-name change keeps the ServiceRef', () => {
    const a = applyReport([], [decl('web', { displayName: 'Web' })], fresh);
    const b = applyReport(a.rows, [decl('web', { displayName: 'Web 2', description: 'new' })], fresh);
    expect(b.created).toEqual([]);
    expect(b.updated.map((r) => r.serviceId)).toEqual(a.created.map((r) => r.serviceId));
  });

  it('M6-19 a key change or delete+recreate gives a new Service ULID; the old P is tombstoned, never reused by the new service', () => {
    const a = applyReport([], [decl('web')], fresh);
    const withPort: ServiceRow[] = a.rows.map((r) => ({ ...r, port: 40123n }));
    const renamed = applyReport(withPort, [decl('www')], fresh);
    expect(renamed.created[0]?.serviceId).not.toEqual(a.created[0]?.serviceId);
    expect(renamed.withdrawn.map((r) => r.declarationKey)).toEqual(['web']);
    expect(renamed.tombstonedPorts).toEqual([40123n]);
    expect(renamed.created[0]?.port).toBeNull(); // the new service starts without P; the old P is excluded by its tombstone
    const deleted = applyReport(withPort, [], fresh);
    const recreated = applyReport(deleted.rows, [decl('web')], fresh);
    expect(recreated.created[0]?.serviceId).not.toEqual(a.created[0]?.serviceId);
    expect(recreated.rows.filter((r) => r.state === 'withdrawn')).toHaveLength(1); // history kept
  });

  it('M6-19 a valid empty report withdraws everything (a missing report never reaches B as a deletion)', () => {
    const a = applyReport([], [decl('a'), decl('b')], fresh);
    const empty = applyReport(a.rows, [], fresh);
    expect(empty.withdrawn.map((r) => r.declarationKey).sort()).toEqual(['a', 'b']);
    expect(empty.rows.every((r) => r.state === 'withdrawn')).toBe(true);
  });

  it('M6-19 random report sequences: ids are stable per continuous key, never reused, every row is kept', () => {
    fc.assert(
      fc.property(fc.array(fc.subarray(['a', 'b', 'c', 'd']), { minLength: 1, maxLength: 20 }), (reports) => {
        let rows: ServiceRow[] = [];
        let k = 0;
        const issued = new Set<string>();
        let prevActive = new Map<string, string>();
        for (const keys of reports) {
          const r = applyReport(
            rows,
            keys.map((x) => decl(x, { displayName: `n${k}` })),
            () => id16(++k + 10_000),
          );
          rows = [...r.rows];
          const active = new Map(
            rows.filter((x) => x.state === 'active').map((x) => [x.declarationKey, toHex(x.serviceId)]),
          );
          expect([...active.keys()].sort()).toEqual([...keys].sort());
          for (const [key, id] of active) {
            if (prevActive.has(key)) expect(id).toBe(prevActive.get(key));
            else {
              expect(issued.has(id)).toBe(false);
              issued.add(id);
            }
          }
          expect(rows.length).toBe(issued.size); // withdrawn rows remain as history
          prevActive = active;
        }
      }),
    );
  });
});
