// Node registration (spec §3.13, decision 0272): the node advertises `node_local_names.v1` before runtime.bind; a
// legacy `requested_hostname` is refused with `unsupported-field`, never ignored. Pure: the codec and the check.
import { encodeOrThrow } from '@homelab/cbor-canonical';
import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { NODE_LOCAL_NAMES_CAPABILITY, NodeRegisterRequestCodec, checkNodeRegistration } from '../src/api/runtime.js';

const NET = new Uint8Array(16).fill(7);

/** Decode, then the §3.13 check: the error code of the first refusal, or the registration. */
const register = (bytes: Uint8Array) => {
  const d = NodeRegisterRequestCodec.decode(bytes);
  if (Either.isLeft(d)) return Either.left(d.left.code);
  return Either.mapLeft(checkNodeRegistration(d.right), (e) => e.code);
};

describe('node.register (spec §3.13)', () => {
  it('§3.13 a registration advertising node_local_names.v1 without any node label is accepted with its capabilities', () => {
    const bytes = NodeRegisterRequestCodec.encodeOrThrow({
      network_id: NET,
      capabilities: [NODE_LOCAL_NAMES_CAPABILITY, 'service_control.v1'],
    });
    const r = register(bytes);
    expect(Either.isRight(r)).toBe(true);
    if (Either.isRight(r)) {
      expect([...r.right.capabilities].sort()).toEqual(['node_local_names.v1', 'service_control.v1']);
      expect(Buffer.from(r.right.networkId).equals(Buffer.from(NET))).toBe(true);
    }
  });

  it('§3.13 an explicit legacy requested_hostname is rejected with unsupported-field, not silently ignored', () => {
    for (const hostname of ['node-a', '']) {
      const bytes = NodeRegisterRequestCodec.encodeOrThrow({
        network_id: NET,
        capabilities: [NODE_LOCAL_NAMES_CAPABILITY],
        requested_hostname: hostname,
      });
      expect(register(bytes)).toEqual(Either.left('unsupported-field'));
    }
  });

  it('§3.13 the legacy field is refused on the raw wire too (hand-encoded map, as an old node would send it)', () => {
    const bytes = encodeOrThrow({
      network_id: NET,
      capabilities: [NODE_LOCAL_NAMES_CAPABILITY],
      requested_hostname: 'legacy-host',
    });
    expect(register(bytes)).toEqual(Either.left('unsupported-field'));
  });

  it('M6-3 §3.13 any other unknown key in a registration is unsupported-field (the old DNS authority tuple included)', () => {
    const bytes = encodeOrThrow({
      network_id: NET,
      capabilities: [NODE_LOCAL_NAMES_CAPABILITY],
      dns_authority: 'legacy',
    });
    expect(register(bytes)).toEqual(Either.left('unsupported-field'));
  });

  it('M6-4 §3.13 a network_id that is not 16 bytes, or duplicated capabilities, is invalid-encoding', () => {
    const shortNet = encodeOrThrow({
      network_id: new Uint8Array(15),
      capabilities: [NODE_LOCAL_NAMES_CAPABILITY],
    });
    expect(register(shortNet)).toEqual(Either.left('invalid-encoding'));
    const dup = encodeOrThrow({
      network_id: NET,
      capabilities: [NODE_LOCAL_NAMES_CAPABILITY, NODE_LOCAL_NAMES_CAPABILITY],
    });
    expect(register(dup)).toEqual(Either.left('invalid-encoding'));
  });
});
