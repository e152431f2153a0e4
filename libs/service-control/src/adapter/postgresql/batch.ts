// One fenced transaction as few PostgreSQL round trips as possible (decision 0130). node-postgres sends one query at
// a time and waits for its answer, so statements are queued and sent together as ONE simple-protocol query string
// (`a; b; c`): PostgreSQL runs them in order and stops at the first error. A statement is sent when somebody awaits
// its result (all statements queued in the same tick share the round trip), or with the COMMIT. Writes nobody awaits
// therefore ride along with the next read or with the COMMIT. The first round trip also carries `BEGIN` and the
// epoch fence read (the authority row FOR SHARE), checked before anything is committed.
//
// The simple protocol has no bind parameters: values are inlined as literals built only by `lit` below (bytea as
// hex, numbers from bigint/int, text through pg's escapeLiteral), never from unchecked strings.
import pg from 'pg';
import { scError } from '../../domain/errors.js';

/** SQL literals for the simple protocol. */
export const lit = {
  bytea: (v: Uint8Array): string => `'\\x${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')}'::bytea`,
  num: (v: bigint | number): string => {
    const s = typeof v === 'bigint' ? v.toString() : Number.isSafeInteger(v) ? String(v) : null;
    if (s === null || !/^-?[0-9]+$/.test(s)) throw new Error(`not an integer: ${String(v)}`);
    return s;
  },
  text: (v: string): string => pg.escapeLiteral(v),
  bool: (v: boolean): string => (v ? 'true' : 'false'),
  json: (v: unknown): string => `${pg.escapeLiteral(JSON.stringify(v))}::jsonb`,
  nullable: <A>(v: A | null, f: (a: A) => string): string => (v === null ? 'NULL' : f(v)),
};

interface Queued {
  readonly sql: string;
  readonly settle: (r: pg.QueryResult | Error) => void;
}

/** A statement's result: a promise that, once awaited (`then` called), makes the batch send what is queued. */
class Deferred<A> implements Promise<A> {
  readonly [Symbol.toStringTag] = 'Promise';
  constructor(
    private readonly inner: Promise<A>,
    private readonly demand: () => void,
  ) {
    inner.catch(() => undefined); // unawaited writes fail through the batch (COMMIT), not as unhandled rejections
  }
  then<T1 = A, T2 = never>(ok?: ((a: A) => T1 | PromiseLike<T1>) | null, err?: ((e: unknown) => T2 | PromiseLike<T2>) | null): Promise<T1 | T2> {
    this.demand();
    return this.inner.then(ok, err);
  }
  catch<T = never>(err?: ((e: unknown) => T | PromiseLike<T>) | null): Promise<A | T> {
    return this.then(undefined, err);
  }
  finally(f?: (() => void) | null): Promise<A> {
    this.demand();
    return this.inner.finally(f);
  }
}

/** The minimal pg surface the store's row functions use (so parameterised `query` keeps working in a batch). */
export interface TxConnection {
  /** Queue a statement; its result arrives with the next round trip. */
  readonly statement: <A>(sql: string, parse: (r: pg.QueryResult) => A) => Promise<A>;
  /** Queue a write whose result nobody needs. */
  readonly write: (sql: string) => void;
  /** A parameterised query (extended protocol): sends what is queued first, then this query on its own. */
  readonly query: (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
}

export class TxBatch implements TxConnection {
  private queue: Queued[] = [];
  private begun = false;
  private scheduled = false;
  private sending: Promise<void> = Promise.resolve();
  /** The first error of any round trip: the transaction is lost, later round trips are not sent. */
  private failed: Error | null = null;
  /**
   * Whether anything but a plain SELECT was queued (writes, DML statements, parameterised queries — conservatively).
   * A transaction that changed no row commits without waiting for the WAL flush (decision 0161).
   */
  private changed = false;
  roundTrips = 0;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly fenceSql: string,
    private readonly checkFence: (r: pg.QueryResult) => Error | null,
  ) {}

  statement = <A>(sql: string, parse: (r: pg.QueryResult) => A): Promise<A> => {
    if (!READ_ONLY.test(sql)) this.changed = true;
    const inner = new Promise<A>((resolve, reject) =>
      this.queue.push({
        sql,
        settle: (r) => {
          if (r instanceof Error) return reject(r);
          try {
            resolve(parse(r));
          } catch (e) {
            reject(e);
          }
        },
      }),
    );
    return new Deferred(inner, () => this.demand());
  };

  write = (sql: string): void => {
    this.changed = true;
    this.queue.push({ sql, settle: () => undefined });
  };

  query = async (text: string, values?: unknown[]): Promise<pg.QueryResult> => {
    this.changed = true;
    await this.flush();
    return this.client.query(text, values);
  };

  private demand(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.flush().catch(() => undefined); // the awaited statements carry the error
    });
  }

  /** Send everything queued (with BEGIN and the fence read the first time). */
  flush(tail: readonly string[] = []): Promise<void> {
    const run = this.sending.then(() => this.send(tail));
    this.sending = run.catch(() => undefined);
    return run;
  }

  private async send(tail: readonly string[]): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    if (this.failed !== null) {
      for (const q of batch) q.settle(this.failed);
      throw this.failed;
    }
    const head = this.begun ? [] : ['BEGIN', this.fenceSql];
    if (batch.length === 0 && tail.length === 0 && head.length === 0) return;
    // The fence must be checked before anything commits: never send COMMIT in the round trip that reads it.
    if (head.length > 0 && tail.length > 0) {
      this.queue = batch;
      await this.send([]);
      return this.send(tail);
    }
    const sqls = [...head, ...batch.map((q) => q.sql), ...tail];
    this.roundTrips++;
    let results: pg.QueryResult[];
    try {
      const r = (await this.client.query(sqls.join(';\n'))) as unknown as pg.QueryResult | pg.QueryResult[];
      results = Array.isArray(r) ? r : [r];
    } catch (e) {
      this.failed = e instanceof Error ? e : new Error(String(e));
      for (const q of batch) q.settle(this.failed);
      throw this.failed;
    }
    if (head.length > 0) {
      this.begun = true;
      const fenced = this.checkFence(results[1] as pg.QueryResult);
      if (fenced !== null) {
        this.failed = fenced;
        for (const q of batch) q.settle(fenced);
        throw fenced;
      }
    }
    batch.forEach((q, i) => q.settle(results[head.length + i] as pg.QueryResult));
  }

  /**
   * Send the queued writes and COMMIT in one round trip (after the fence was read and checked). A transaction that
   * changed no row (its only WAL is row locks) skips the synchronous flush: nothing of it must survive a crash, and
   * every row it read was committed durably by its writer before it became visible (decision 0161).
   */
  commit(): Promise<void> {
    return this.flush(this.changed ? ['COMMIT'] : ['SET LOCAL synchronous_commit = off', 'COMMIT']);
  }

  async rollback(): Promise<void> {
    const dropped = this.queue;
    this.queue = [];
    for (const q of dropped) q.settle(new Error('transaction rolled back'));
    if (this.begun || this.failed !== null) await this.client.query('ROLLBACK').catch(() => undefined);
  }
}

/** A plain SELECT (row locks allowed; no data-modifying CTE, which would start with WITH). */
const READ_ONLY = /^\s*SELECT\b/i;

export const staleEpoch = () => scError('stale-epoch', 'the authority epoch changed; this transaction is fenced out');
