// The benches' load generator: clients are other machines, so what they spend on their side (sealing a request,
// verifying the answer, an HTTP client library) is not nsd's work and must not compete with nsd for this machine's
// two cores inside the timed window. Each client therefore seals all its requests BEFORE the window, sends them one
// after another as plain HTTP/1.1 keep-alive POSTs on its own TCP socket (TCP_NODELAY, a few µs per request), keeps
// the answers, and verifies every answer AFTER the window (signature against the NSD key, replay check, decodes as
// a Message that is not an error). A failed check fails the run: nothing unverified is counted.
import { readFileSync } from 'node:fs';
import { type Socket, connect } from 'node:net';
import { Either } from 'effect';
import { type Message, decodeMessage } from '@homelab/service-control';
import {
  ENVELOPE_CONTENT_TYPE,
  type TransportSide,
  receiveEnvelope,
  sealEnvelope,
} from '@homelab/service-control/transport';

/** One client: its transport side (signer, trust = the NSD key, replay cache) and its payloads, in order. */
export interface LoadClient {
  readonly side: TransportSide;
  readonly payloads: readonly Uint8Array[];
}

export interface LoadCheck {
  readonly failures: number;
  readonly firstFailure: string | null;
  /** The verified answers of each client, in order. */
  readonly answers: readonly (readonly Message[])[];
}

const CRLF2 = Buffer.from('\r\n\r\n');

/** µs the calling thread has run on a CPU so far (Linux: /proc/thread-self/schedstat), null elsewhere. */
const threadCpuUs = (): number | null => {
  try {
    const run = Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
    return Number.isFinite(run) ? run / 1e3 : null;
  } catch {
    return null;
  }
};

/** A keep-alive HTTP/1.1 connection that posts one body at a time and returns the status and the body of the answer. */
class Connection {
  private buf: Buffer = Buffer.alloc(0);
  private waiting: ((r: { status: number; body: Buffer } | Error) => void) | null = null;
  private constructor(
    private readonly socket: Socket,
    private readonly head: string,
  ) {
    socket.on('data', (c: Buffer) => {
      this.buf = this.buf.length === 0 ? c : Buffer.concat([this.buf, c]);
      this.parse();
    });
    socket.on('error', (e) => this.settle(e));
    socket.on('close', () => {
      this.closed = true;
      this.settle(new Error('connection closed'));
    });
  }
  /** Closed by the peer (or an error) while no request was waiting: the next post fails at once instead of hanging. */
  private closed = false;

  static open(url: URL): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: url.hostname, port: Number(url.port), noDelay: true }, () => {
        socket.off('error', reject);
        resolve(
          new Connection(
            socket,
            `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: ${ENVELOPE_CONTENT_TYPE}\r\nContent-Length: `,
          ),
        );
      });
      socket.once('error', reject);
    });
  }

  post(body: Uint8Array): Promise<{ status: number; body: Buffer }> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('connection closed by nsd before this request'));
      this.waiting = (r) => (r instanceof Error ? reject(r) : resolve(r));
      this.socket.write(Buffer.concat([Buffer.from(`${this.head}${body.length}\r\n\r\n`, 'latin1'), body]));
    });
  }

  private parse(): void {
    const end = this.buf.indexOf(CRLF2);
    if (end < 0) return;
    const head = this.buf.toString('latin1', 0, end);
    const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    if (length === null) return this.settle(new Error(`answer without content-length: ${head.split('\r\n')[0]}`));
    const total = end + 4 + Number(length[1]);
    if (this.buf.length < total) return;
    const body = this.buf.subarray(end + 4, total);
    this.buf = this.buf.subarray(total);
    this.settle({ status: Number(head.slice(9, 12)), body });
  }

  private settle(r: { status: number; body: Buffer } | Error): void {
    const w = this.waiting;
    this.waiting = null;
    w?.(r);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Prepared clients: sealed requests and one open connection each. `run()` is the timed window, `verify()` the checks. */
export const prepareLoad = async (url: string, clients: readonly LoadClient[]) => {
  const target = new URL(url);
  const prepared = await Promise.all(
    clients.map(async (c) => ({
      side: c.side,
      sealed: c.payloads.map((p) => sealEnvelope(c.side.signer, p)),
      connection: await Connection.open(target),
    })),
  );
  let raw: { status: number; body: Buffer }[][] = [];
  /** The timed window: every client posts its sealed requests one after another, all clients at once. */
  const run = async (): Promise<{
    readonly requests: number;
    readonly seconds: number;
    readonly threadCpuUs: number | null;
  }> => {
    const cpu0 = threadCpuUs();
    const t0 = process.hrtime.bigint();
    raw = await Promise.all(
      prepared.map(async ({ sealed, connection }) => {
        const out: { status: number; body: Buffer }[] = [];
        for (const s of sealed) out.push(await connection.post(s));
        return out;
      }),
    );
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu1 = threadCpuUs();
    for (const p of prepared) p.connection.close();
    return {
      requests: raw.reduce((n, r) => n + r.length, 0),
      seconds,
      threadCpuUs: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0,
    };
  };
  /** After the window: every answer is a signed, fresh envelope of the NSD key carrying a non-error Message. */
  const verify = (): LoadCheck => {
    let failures = 0;
    let firstFailure: string | null = null;
    const fail = (why: string): null => {
      failures++;
      firstFailure ??= why;
      return null;
    };
    const check = (side: TransportSide, r: { status: number; body: Buffer }): Message | null => {
      if (r.status !== 200) return fail(`HTTP ${r.status} ${r.body.toString('utf8')}`);
      const env = receiveEnvelope(side, new Uint8Array(r.body));
      if (Either.isLeft(env)) return fail(env.left.message);
      const m = decodeMessage(env.right.payload);
      if (Either.isLeft(m)) return fail(m.left.message);
      if (m.right.kind === 'error')
        return fail(JSON.stringify(m.right.body, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)));
      return m.right;
    };
    const answers = raw.map((rs, i) =>
      rs.map((r) => check((prepared[i] as (typeof prepared)[number]).side, r)).filter((m): m is Message => m !== null),
    );
    return { failures, firstFailure, answers };
  };
  return { run, verify };
};
