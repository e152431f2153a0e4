// One fenced transaction as few PostgreSQL round trips as possible (decision 0130). node-postgres sends one query at
// a time and waits for its answer, so statements are queued and sent together as ONE simple-protocol query string
// (`a; b; c`): PostgreSQL runs them in order and stops at the first error. A statement is sent when somebody awaits
// its result (all statements queued in the same tick share the round trip), or with the COMMIT. Writes nobody awaits
// therefore ride along with the next read or with the COMMIT. The first round trip also carries `BEGIN` and the
// epoch fence read (the authority row FOR SHARE), checked before anything is committed.
//
// The simple protocol has no bind parameters: values are inlined as literals built only by `lit` below (bytea as
// hex, numbers from bigint/int, text through pg's escapeLiteral), never from unchecked strings — and marked, so that
// each statement goes as EXECUTE of a statement prepared once per connection (decision 0194: no planning per request).
import { createHash } from 'node:crypto';
import pg from 'pg';
import { scError } from '../../domain/errors.js';

// Values are MARKED where they are inlined (U+0001 literal U+0002, two control characters; any cast after it): a
// batch lifts them out of each statement into the parameters of a prepared statement (below), and `plainSql` drops
// the marks for SQL sent outside a batch. The marks are Latin-1 so that the SQL text stays a one-byte string (V8),
// which pg UTF-8 encodes on the fast path (decision 0740; private-use marks made every statement a two-byte string).
const M0 = '\u0001';
const M1 = '\u0002';
// eslint-disable-next-line no-control-regex -- the marks are control characters on purpose (see above)
const MARKED = /\u0001([^\u0001\u0002]*)\u0002/g;
const mark = (sqlLiteral: string): string => `${M0}${sqlLiteral}${M1}`;
/**
 * A text literal. A text that itself contains a mark character goes as the expression of its UTF-8 bytes in hex
 * (mark-free), so no value can open or close a mark. JSON never contains one (JSON.stringify escapes U+0000–U+001F).
 */
const textLiteral = (v: string): string =>
  v.includes(M0) || v.includes(M1)
    ? `convert_from('\\x${Buffer.from(v, 'utf8').toString('hex')}'::bytea, 'UTF8')`
    : pg.escapeLiteral(v);

/** SQL text with the marked literals inline (for a statement that does not go through a batch). */
export const plainSql = (sql: string): string => sql.replace(MARKED, '$1');

/** The bytes as a Buffer over the same memory (pg's bytea parameter type; no copy). */
export const pgBytes = (v: Uint8Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

/** SQL literals for the simple protocol (marked values; casts outside the marks so that a prepared form keeps them). */
export const lit = {
  bytea: (v: Uint8Array): string => `${mark(`'\\x${pgBytes(v).toString('hex')}'`)}::bytea`,
  num: (v: bigint | number): string => {
    const s = typeof v === 'bigint' ? v.toString() : Number.isSafeInteger(v) ? String(v) : null;
    if (s === null || !/^-?[0-9]+$/.test(s)) throw new Error(`not an integer: ${String(v)}`);
    return mark(s);
  },
  text: (v: string): string => `${mark(textLiteral(v))}::text`,
  bool: (v: boolean): string => `${mark(v ? 'true' : 'false')}::boolean`,
  json: (v: unknown): string => `${mark(textLiteral(JSON.stringify(v)))}::jsonb`,
  nullable: <A>(v: A | null, f: (a: A) => string): string => (v === null ? 'NULL' : f(v)),
};

/**
 * The prepared form of one statement (decision 0194): PostgreSQL plans every statement of the simple protocol anew,
 * ≈ 0.1–0.5 ms each for the fence and lease reads — more than executing them. A statement whose marked values are
 * lifted out becomes `EXECUTE sc_<hash>(values…)` of a statement PREPAREd once per connection (its parameter types
 * inferred from the casts and the context). Only single SELECT / INSERT / UPDATE / DELETE / WITH statements are
 * prepared; anything else is sent as it is.
 */
const PREPARABLE = /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i;
interface Lifted {
  readonly name: string;
  readonly template: string;
  readonly args: readonly string[];
}
const lift = (sql: string): Lifted | null => {
  if (!PREPARABLE.test(sql)) return null;
  const args: string[] = [];
  const template = sql.replace(MARKED, (_m, literal: string) => {
    args.push(literal);
    return `$${args.length}`;
  });
  if (template.includes(';') || template.includes(M0) || template.includes(M1)) return null;
  return { name: nameOf(template), template, args };
};

/** Statement names by template (a few dozen shapes): the hash is computed once per shape, not per request. */
const names = new Map<string, string>();
const nameOf = (template: string): string => {
  let name = names.get(template);
  if (name === undefined) {
    if (names.size >= 4096) names.clear(); // shapes that vary without bound (multi-row VALUES): keep the memo small
    name = `sc_${createHash('sha1').update(template).digest('hex').slice(0, 20)}`;
    names.set(template, name);
  }
  return name;
};

/**
 * Statements prepared on each connection (by its Client object). After a failed round trip it is not known which
 * PREPAREs ran: the next round trip on that connection starts with DEALLOCATE ALL.
 */
const preparedOn = new WeakMap<object, { names: Set<string>; reset: boolean }>();
/** More distinct statements than this on one connection (multi-row VALUES vary in length): start over. */
const MAX_PREPARED = 512;

interface Queued {
  readonly sql: string;
  readonly settle: (r: pg.QueryResult | Error) => void;
  /** A row lock of the global order (decision 0370): sent after the unordered statements of its round trip, by key. */
  readonly lockKey?: string;
}

/**
 * The statements of one round trip in the order they are sent (decision 0370): as queued, except that the ordered row
 * locks (`lockKey`, the port allocation rows: lowercase hex of the service id, which sorts as PostgreSQL sorts bytea)
 * go last, in key order. Every transaction that locks several allocation rows in one round trip — the snapshot
 * production, a report's allocation, a consumer's acquire, a group of refreshes — therefore takes them in one global
 * order, after its identity's rows and the publisher's port lock; two of them can no longer wait for each other in a
 * cycle over allocation rows.
 */
const inLockOrder = (batch: readonly Queued[]): readonly Queued[] => {
  if (!batch.some((q) => q.lockKey !== undefined)) return batch;
  const plain = batch.filter((q) => q.lockKey === undefined);
  const locks = batch
    .filter((q) => q.lockKey !== undefined)
    .sort((a, b) => ((a.lockKey as string) < (b.lockKey as string) ? -1 : a.lockKey === b.lockKey ? 0 : 1));
  return [...plain, ...locks];
};

/** A statement's result: a promise that, once awaited (`then` called), makes the batch send what is queued. */
class Deferred<A> implements Promise<A> {
  readonly [Symbol.toStringTag] = 'Promise';
  constructor(
    private readonly inner: Promise<A>,
    private readonly demand: () => void,
  ) {
    inner.catch(() => undefined); // unawaited writes fail through the batch (COMMIT), not as unhandled rejections
  }
  then<T1 = A, T2 = never>(
    ok?: ((a: A) => T1 | PromiseLike<T1>) | null,
    err?: ((e: unknown) => T2 | PromiseLike<T2>) | null,
  ): Promise<T1 | T2> {
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
  /**
   * Queue a statement; its result arrives with the next round trip. `lockKey`: the statement takes a row lock of the
   * global order (decision 0370) and is sent after the round trip's other statements, in key order.
   */
  readonly statement: <A>(sql: string, parse: (r: pg.QueryResult) => A, lockKey?: string) => Promise<A>;
  /** Queue a write whose result nobody needs. */
  readonly write: (sql: string) => void;
  /**
   * Queue a statement that changes rows and whose result is read (a function call that writes, decision 0372): the
   * transaction then commits with the synchronous flush, which a plain SELECT would let it skip.
   */
  readonly writing: <A>(sql: string, parse: (r: pg.QueryResult) => A) => Promise<A>;
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
    /** `BEGIN` or `BEGIN ISOLATION LEVEL REPEATABLE READ` (one snapshot for every read, decision 0162). */
    private readonly beginSql = 'BEGIN',
    /**
     * The transaction of a commit group (group-commit.ts): several requests' statements in one transaction. A member
     * may have turned the synchronous flush off for the transaction (`ack_fast` on a repeat does, decision 0161), so a
     * group that changed a row sets it back to the default right before its COMMIT.
     */
    private readonly group = false,
  ) {}

  /** Record that a statement the read-only test cannot see through (a function call that inserts) changed a row. */
  markWritten(): void {
    this.changed = true;
  }

  statement = <A>(sql: string, parse: (r: pg.QueryResult) => A, lockKey?: string): Promise<A> => {
    if (!READ_ONLY.test(sql)) this.changed = true;
    const inner = new Promise<A>((resolve, reject) =>
      this.queue.push({
        sql,
        ...(lockKey === undefined ? {} : { lockKey }),
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

  writing = <A>(sql: string, parse: (r: pg.QueryResult) => A): Promise<A> => {
    this.changed = true;
    return this.statement(sql, parse);
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
    const batch = inLockOrder(this.queue);
    this.queue = [];
    if (this.failed !== null) {
      for (const q of batch) q.settle(this.failed);
      throw this.failed;
    }
    const head = this.begun ? [] : [this.beginSql, this.fenceSql];
    if (batch.length === 0 && tail.length === 0 && head.length === 0) return;
    // The fence must be checked before anything commits: never send COMMIT in the round trip that reads it.
    if (head.length > 0 && tail.length > 0) {
      this.queue = [...batch];
      await this.send([]);
      return this.send(tail);
    }
    // each statement of the batch as EXECUTE of its prepared form; a PREPARE rides ahead of its first use on this
    // connection and yields one extra (empty) result, skipped below
    let prepared = preparedOn.get(this.client);
    if (prepared === undefined) preparedOn.set(this.client, (prepared = { names: new Set(), reset: false }));
    const sqls: string[] = [];
    // its result is not one of the statements' (resultIndex skips it); sent after BEGIN when there is one, since
    // `BEGIN ISOLATION LEVEL …` must be the first statement of its query string
    const deallocate = prepared.reset || prepared.names.size > MAX_PREPARED;
    if (deallocate) {
      prepared.names.clear();
      prepared.reset = false;
    }
    const known = prepared.names;
    const fresh = new Set<string>();
    const resultIndex: number[] = []; // result position of each head/batch/tail statement
    const push = (sql: string): void => {
      const l = lift(sql);
      if (l === null) sqls.push(plainSql(sql));
      else {
        if (!known.has(l.name) && !fresh.has(l.name)) {
          sqls.push(`PREPARE ${l.name} AS ${l.template}`);
          fresh.add(l.name);
        }
        sqls.push(l.args.length === 0 ? `EXECUTE ${l.name}` : `EXECUTE ${l.name}(${l.args.join(', ')})`);
      }
      resultIndex.push(sqls.length - 1);
    };
    const all_ = [...head, ...batch.map((b) => b.sql), ...tail];
    all_.forEach((q, i) => {
      if (deallocate && i === (head.length > 0 ? 1 : 0)) sqls.push('DEALLOCATE ALL');
      push(q);
    });
    if (deallocate && all_.length <= (head.length > 0 ? 1 : 0)) sqls.push('DEALLOCATE ALL');
    this.roundTrips++;
    let all: pg.QueryResult[];
    try {
      const r = (await this.client.query(sqls.join(';\n'))) as unknown as pg.QueryResult | pg.QueryResult[];
      all = Array.isArray(r) ? r : [r];
    } catch (e) {
      // a PREPARE may or may not have run before the error: forget what this connection has (DEALLOCATE ALL next time)
      prepared.reset = true;
      this.failed = e instanceof Error ? e : new Error(String(e));
      for (const q of batch) q.settle(this.failed);
      throw this.failed;
    }
    for (const n of fresh) known.add(n);
    const results = resultIndex.map((i) => all[i] as pg.QueryResult);
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
    if (!this.changed) return this.flush(['SET LOCAL synchronous_commit = off', 'COMMIT']);
    return this.flush(this.group ? ['SET LOCAL synchronous_commit TO DEFAULT', 'COMMIT'] : ['COMMIT']);
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
