// Decision 0520: ns-daemon registers its node (node.register, spec §3.13) once per process, before its first
// runtime.bind. A re-bind of the same process — its stream broke because B failed over to a new epoch — binds, authenticates
// and opens a session again without repeating the registration, and streams again; a restarted process (a new Daemon on
// the same state file) registers again before its first bind. B = Authority on the machine's PostgreSQL, two of them on
// one database for the failover (the second takes over with epoch + 1); A = the whole Daemon in-process on a temp-file
// SQLite state file, talking to whichever Authority is current through an in-process transport.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useDatabase } from '@homelab/testbed/vitest';
import { Either } from 'effect';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeMessage } from '../src/api/message.js';
import { openSqliteDaemonStore } from '../src/adapter/sqlite/daemon-store.js';
import { generateSigner } from '../src/adapter/transport/index.js';
import { authorityProcesses, eventually, inProcessTransport, runDaemon } from './in-process-daemon.js';
import { rid16 } from './wire.js';

const db = useDatabase('daemonrebind');
const dir = mkdtempSync(join(tmpdir(), 'ns-daemonrebind-'));
const { boot, close } = authorityProcesses(() => db.config);
afterAll(async () => {
  await close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a re-bind of the same daemon process (decision 0520)', () => {
  it('§3.4 §3.13 after a failover the daemon whose stream broke re-binds without node.register and streams in the new epoch; a restarted process registers again before its first bind', async () => {
    const first = await boot();
    let B = first;
    const net = rid16();
    const identity = generateSigner().signer.machineId;
    await B.store.addMember(identity, net);
    const stateFile = join(dir, 'daemon.db');

    /** One daemon process on the state file; every request it sends (path or kind) recorded in order. */
    const run = () => {
      const store = openSqliteDaemonStore(stateFile);
      const sent: string[] = [];
      const transport = inProcessTransport(() => B, identity, {
        control: (name) => {
          if (name !== 'machine.heartbeat') sent.push(name);
        },
        message: (payload) => {
          const m = decodeMessage(payload);
          sent.push(Either.isRight(m) ? m.right.kind : 'undecodable');
        },
        streamOpened: () => sent.push('config.stream'),
      });
      const d = runDaemon({ store, identity, networkId: net, transport, declarations: () => Either.right([]) }, () =>
        store.close(),
      );
      return { ...d, sent };
    };

    const a = run();
    await eventually(() => a.count('snapshot-acked') >= 1, 'the first snapshot acknowledged');
    const before = a.sent.length;
    // (a fresh state file asks runtime.floor first, §3.4 step 2; the registration precedes it too)
    expect(a.sent.slice(0, a.sent.indexOf('runtime.bind') + 1).filter((k) => k !== 'runtime.floor')).toEqual([
      'info.get',
      'node.register',
      'runtime.bind',
    ]);

    // the failover: a second B takes over on the same database with epoch + 1; the first one's streams end
    const second = await boot();
    expect(second.epoch).toBe(first.epoch + 1n);
    B = second;
    first.authority.closeStreams();
    await eventually(
      () => a.count('stream-open') >= 2 && a.count('snapshot-acked') >= 2,
      'streaming from the new authority again',
    );
    const after = a.sent.slice(before);
    // the re-bind of the same process: bind, auth, session and stream again — no registration
    expect(after.filter((k) => k !== 'snapshot.ack')).toEqual([
      'runtime.bind',
      'machine.auth',
      'session.open',
      'config.stream',
    ]);
    expect(a.sent.filter((k) => k === 'node.register')).toHaveLength(1);
    expect(a.log.filter((l) => l.event === 'bound').map((l) => l.fields['epoch'])).toEqual([
      String(first.epoch),
      String(second.epoch),
    ]);
    expect(a.daemon.status.phase).toBe('streaming');
    await a.stop();

    // a restarted process on the same state file registers again before its first bind, and streams
    const b = run();
    await eventually(() => b.count('snapshot-acked') >= 1, 'the restarted daemon streaming');
    // (a fresh state file asks runtime.floor first, §3.4 step 2; the registration precedes it too)
    expect(b.sent.slice(0, b.sent.indexOf('runtime.bind') + 1).filter((k) => k !== 'runtime.floor')).toEqual([
      'info.get',
      'node.register',
      'runtime.bind',
    ]);
    expect(b.sent.filter((k) => k === 'node.register')).toHaveLength(1);
    await b.stop();
    for (const d of [a, b]) expect(d.log.filter((l) => l.event === 'failed')).toEqual([]);
    await second.authority.idle();
  });
});
