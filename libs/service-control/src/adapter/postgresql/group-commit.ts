// Group commit (issue 25, decision 0330): requests in flight at the same time whose transactions touch different fence
// rows run as ONE PostgreSQL transaction — one BEGIN, one epoch fence read, their statements pipelined into shared round
// trips (batch.ts), ONE COMMIT and so one WAL flush — and each member's result is handed back only after that COMMIT.
//
// Disjointness: a member names its scope (identity, Network); no two members of the groups in flight share an identity
// or a Network. Every row a request transaction locks is of its identity or its Network, so two members never wait for
// each other, and a group waits for an outside transaction only where each member alone would have (no new deadlock:
// a cycle through the group would need an outside transaction holding rows of two Networks). A later request of a busy
// scope waits for the next group, so one scope's requests still commit in arrival order.
//
// All or nothing, then alone: when any member refuses (Left), throws, or the group's statements or COMMIT fail,
// the whole group is rolled back — nothing of it was committed — and every member runs again ALONE, exactly as without
// grouping (its own transaction, its own answer). Refusals are rare on the steady path; they pay one extra run.
//
// Forming: no timer. A group starts as soon as fewer than `maxInFlight` groups run, with every admissible member
// waiting (at most `maxMembers`); while groups run, the next requests accumulate — one client alone is never delayed
// by more than one event-loop turn, and the groups grow with the load. A group of one runs as the member alone.
//
// One statement for a group's refreshes (decision 0640): members that carry a `fast` form (a listener.ready /
// lease.refresh whose intent is remembered, decision 0580) go to the store's `fastGroup` — ONE autocommit statement
// for all of them, one round trip and one COMMIT — while the group's other members commit as a group of their own,
// at the same time (their keys are disjoint, as in any two groups in flight). The statement grants a member exactly
// where the general path would grant it identically and writes nothing for the others (`slow`): those then run the
// general path, as a group of their own (or alone), before the group's keys are released. Each granted member's
// answer is handed back after the statement's COMMIT and the crash point after it, as a group's.
import { Either } from 'effect';
import type pg from 'pg';
import { toHex } from '../../domain/bytes.js';
import type { ServiceControlError } from '../../domain/errors.js';
import type { TxBatch } from './batch.js';

/** One request in a group: its scope, how it runs inside a group's transaction, and how it runs alone. */
export interface GroupMember<A> {
  readonly identity: Uint8Array;
  readonly networkId: Uint8Array;
  readonly epoch: bigint;
  /**
   * The member locks rows of its identity and only its own services' allocation rows of its Network (a listener.ready
   * or lease.refresh, decision 0370): it may share its group with other such members of the same Network — never with
   * a member of that Network that does not share it.
   */
  readonly shareNetwork?: boolean;
  /**
   * With `shareNetwork`: the member also locks OTHER publishers' allocation rows of its Network — still only in its
   * first round trip, in key order (a lease.acquire, decision 0405). It shares its group and its Network with other
   * sharing members, but never runs while a member of its Network that does not share it is in flight, nor starts
   * while one waits ahead of it: that member (a report) takes its publisher's allocation rows in one statement outside
   * the round trip's key order, so only rows no sharer locks may be taken that way.
   */
  readonly othersAllocations?: boolean;
  /** The member's statements on the group's transaction; Left or a throw sends the whole group back to `alone`. */
  readonly run: (batch: TxBatch) => Promise<Either.Either<A, ServiceControlError>>;
  /** The member in its own transaction (after a failed group), exactly the ungrouped path. */
  readonly alone: () => Promise<Either.Either<A, ServiceControlError>>;
  /** The member's one-statement form (decision 0640), where it has one: `fastGroup` decides it with the others. */
  readonly fast?: FastMember<A>;
}

/** A member that the store's group statement may decide and write (a listener.ready / lease.refresh, decision 0640). */
export interface FastMember<A> {
  /** The statement's input, computed when the member's group forms (not before); null: the general path. */
  readonly input: () => unknown;
  /** The answer of a member the statement granted (its grant and mark committed). */
  readonly granted: () => A;
  /** The general path in a transaction of its own, after the statement wrote nothing of it (no statement again). */
  readonly general: () => Promise<Either.Either<A, ServiceControlError>>;
}

export interface GroupCommitOptions {
  /** Groups in flight at once (each holds one pooled connection). */
  readonly maxInFlight: number;
  /** Members of one group at most. */
  readonly maxMembers: number;
  /** A pooled connection (released after the group). */
  readonly connect: () => Promise<pg.PoolClient>;
  /** A fresh transaction batch on `c`, fenced on `epoch`, in group mode. */
  readonly open: (c: pg.PoolClient, epoch: bigint) => TxBatch;
  /** After the group's COMMIT, before any member's result is handed back (the crash point "after the batch commit"). */
  readonly afterCommit?: () => void;
  /**
   * After member `index` (of `size`) got its result, before the next one does (the crash point "after some
   * replies": the hook may wait until that reply left the process).
   */
  readonly afterMember?: (index: number, size: number) => void | Promise<void>;
  /** A connection lost during the COMMIT, as the storage error every member answers. */
  readonly lost: (e: unknown) => ServiceControlError;
  /** Counts: groups committed, their members, groups rolled back and run alone. */
  readonly stats: GroupCommitStats;
  /**
   * The one statement of a group's fast members (decision 0640), in its own autocommit transaction: for each input in
   * order, whether it was granted (written and committed); the others were not written. A throw: nothing is known of
   * it — every member takes the general path, which finds a committed grant as the retransmission it then is.
   */
  readonly fastGroup?: (epoch: bigint, inputs: readonly unknown[]) => Promise<readonly boolean[]>;
  /**
   * Fast members (a refresh with its one-statement form, sharing its Network) run ALONE — their own `refresh_fast`
   * statement on their own connection, not waiting for a group — while fewer than this many of them are in flight;
   * beyond, they wait for a group (decision 0640: alone is faster while connections are free, the group statement once
   * they are not). 0 or absent: always grouped.
   */
  readonly maxFastAlone?: number;
}

export interface GroupCommitStats {
  groups: number;
  members: number;
  fallbacks: number;
  /** Group statements sent (decision 0640; each one COMMIT), and the members they granted. */
  fastGroups?: number;
  fastGranted?: number;
}

interface Waiting {
  readonly member: GroupMember<unknown>;
  /** The scope keys no two members of the groups in flight share: identity and Network, or identity alone (shared). */
  readonly keys: readonly string[];
  /** The Network's key (`n…`), also of a member that shares its Network. */
  readonly net: string;
  readonly resolve: (r: Either.Either<unknown, ServiceControlError>) => void;
  readonly reject: (e: unknown) => void;
}

export class GroupCommit {
  private pending: Waiting[] = [];
  /** Scope keys of the members of the groups in flight (and of their alone runs after a failed group). */
  private readonly busy = new Set<string>();
  /** Networks (`n…`) with members that lock other publishers' allocation rows in flight, and how many (decision 0405). */
  private readonly othersBusy = new Map<string, number>();
  private inFlight = 0;
  /** Fast members running alone (`maxFastAlone`). */
  private fastAlone = 0;
  private scheduled = false;

  constructor(private readonly o: GroupCommitOptions) {}

  submit<A>(member: GroupMember<A>): Promise<Either.Either<A, ServiceControlError>> {
    return new Promise((resolve, reject) => {
      const net = `n${toHex(member.networkId)}`;
      this.pending.push({
        member: member as GroupMember<unknown>,
        keys: member.shareNetwork === true ? [`i${toHex(member.identity)}`] : [`i${toHex(member.identity)}`, net],
        net,
        resolve: resolve as Waiting['resolve'],
        reject,
      });
      this.schedule();
    });
  }

  /** Start groups after the current turn: requests arriving in the same turn share a group. */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    if ((this.o.maxFastAlone ?? 0) > 0) this.startFastAlone();
    while (this.inFlight < this.o.maxInFlight && this.pending.length > 0) {
      const taken: Waiting[] = [];
      const left: Waiting[] = [];
      const keys = new Set<string>();
      // the Networks of this group's members, by kind: a Network's members share it, or one member has it alone
      const shared = new Set<string>();
      const alone = new Set<string>();
      const epoch = this.pending[0]?.member.epoch;
      for (const w of this.pending) {
        const sharing = w.member.shareNetwork === true;
        const others = sharing && w.member.othersAllocations === true;
        const free =
          taken.length < this.o.maxMembers &&
          w.member.epoch === epoch &&
          !w.keys.some((k) => this.busy.has(k) || keys.has(k)) &&
          !(sharing ? alone : shared).has(w.net) &&
          // decision 0405: an acquire waits for a member of its Network that does not share it (in flight or ahead of
          // it), and such a member waits for the acquires of its Network in flight
          (others ? !this.busy.has(w.net) && !keys.has(w.net) : sharing || !this.othersBusy.has(w.net));
        // a member that cannot go keeps its scope for the requests behind it (arrival order per scope)
        for (const k of w.keys) keys.add(k);
        if (free) (sharing ? shared : alone).add(w.net);
        (free ? taken : left).push(w);
      }
      if (taken.length === 0) return; // everything waiting is of a busy scope: the end of a group pumps again
      this.pending = left;
      const othersNets = taken.filter((w) => w.member.othersAllocations === true).map((w) => w.net);
      for (const w of taken) for (const k of w.keys) this.busy.add(k);
      for (const n of othersNets) this.othersBusy.set(n, (this.othersBusy.get(n) ?? 0) + 1);
      this.inFlight++;
      void this.runGroup(taken, epoch as bigint).finally(() => {
        this.inFlight--;
        for (const w of taken) for (const k of w.keys) this.busy.delete(k);
        for (const n of othersNets) {
          const left = (this.othersBusy.get(n) ?? 1) - 1;
          if (left === 0) this.othersBusy.delete(n);
          else this.othersBusy.set(n, left);
        }
        this.pump();
      });
    }
  }

  /**
   * Start waiting fast members alone while fewer than `maxFastAlone` are (decision 0640). A member whose scope is busy,
   * or has a member waiting ahead of it, stays (arrival order per scope); its key is held while it runs, as a group's.
   */
  private startFastAlone(): void {
    const max = this.o.maxFastAlone ?? 0;
    const ahead = new Set<string>();
    const left: Waiting[] = [];
    for (const w of this.pending) {
      const m = w.member;
      const go =
        this.fastAlone < max &&
        m.fast !== undefined &&
        m.shareNetwork === true &&
        m.othersAllocations !== true &&
        !w.keys.some((k) => this.busy.has(k) || ahead.has(k)) &&
        m.fast.input() !== null;
      for (const k of w.keys) ahead.add(k);
      if (!go) {
        left.push(w);
        continue;
      }
      this.fastAlone++;
      for (const k of w.keys) this.busy.add(k);
      void m
        .alone()
        .then(w.resolve, w.reject)
        .finally(() => {
          this.fastAlone--;
          for (const k of w.keys) this.busy.delete(k);
          this.pump();
        });
    }
    this.pending = left;
  }

  private async runGroup(members: readonly Waiting[], epoch: bigint): Promise<void> {
    // a group of one is the member alone: its own path has fewer round trips (the one-statement ACK: one, not two)
    const [only] = members;
    if (members.length === 1 && only !== undefined) return only.member.alone().then(only.resolve, only.reject);
    if (this.o.fastGroup !== undefined) {
      // decision 0640: the members with a one-statement form in one statement, the others as a group of their own
      const fast: { readonly w: Waiting; readonly input: unknown }[] = [];
      const rest: Waiting[] = [];
      for (const w of members) {
        const input = w.member.fast === undefined ? null : w.member.fast.input();
        if (input === null || input === undefined) rest.push(w);
        else fast.push({ w, input });
      }
      if (fast.length > 0) {
        await Promise.all([this.runFast(fast, epoch), this.runGeneral(rest, epoch, (w) => w.member.alone())]);
        return;
      }
    }
    return this.runGeneral(members, epoch, (w) => w.member.alone());
  }

  /** The fast members' one statement; the granted ones answered after its COMMIT, the others by the general path. */
  private async runFast(fast: readonly { readonly w: Waiting; readonly input: unknown }[], epoch: bigint) {
    const [one] = fast;
    // one member: its lone path, which is the same one statement (refresh_fast)
    if (fast.length === 1 && one !== undefined) return one.w.member.alone().then(one.w.resolve, one.w.reject);
    let granted: readonly boolean[] | null;
    try {
      granted = await (this.o.fastGroup as NonNullable<GroupCommitOptions['fastGroup']>)(
        epoch,
        fast.map((f) => f.input),
      );
    } catch {
      granted = null;
    }
    const won = fast.filter((_, i) => granted?.[i] === true).map((f) => f.w);
    const slow = fast.filter((_, i) => granted?.[i] !== true).map((f) => f.w);
    if (granted !== null) {
      this.o.stats.fastGroups = (this.o.stats.fastGroups ?? 0) + 1;
      this.o.stats.fastGranted = (this.o.stats.fastGranted ?? 0) + won.length;
    }
    // the granted ones: each member's own answer, computed now (its general path never ran)
    if (won.length > 0)
      await this.answerCommitted(won, true, (w) => Either.right((w.member.fast as FastMember<unknown>).granted()));
    // nothing of these was written: the general path, without the statement again
    await this.runGeneral(slow, epoch, (w) => (w.member.fast as FastMember<unknown>).general());
  }

  /** Members through the general path: a group transaction, alone when one (`alone` is how a member runs alone). */
  private async runGeneral(
    members: readonly Waiting[],
    epoch: bigint,
    alone: (w: Waiting) => Promise<Either.Either<unknown, ServiceControlError>>,
  ): Promise<void> {
    const [only] = members;
    if (members.length === 0) return;
    if (members.length === 1 && only !== undefined) return alone(only).then(only.resolve, only.reject);
    const committed = await this.tryGroup(members, epoch);
    if (committed === null) {
      this.o.stats.fallbacks++;
      // nothing of the group was committed: each member alone, as if it had never been grouped
      await Promise.all(members.map((w) => alone(w).then(w.resolve, w.reject)));
      return;
    }
    this.o.stats.groups++;
    this.o.stats.members += members.length;
    // the crash point only when the COMMIT is known to have run (a lost COMMIT answers each member its storage error)
    await this.answerCommitted(
      members,
      committed.every(Either.isRight),
      (_, i) => committed[i] as Either.Either<unknown, ServiceControlError>,
    );
  }

  /**
   * Answer members whose statement or group COMMITted, in order (`afterMember` between two: the tests' hook). First the
   * crash point after the COMMIT (when `crashPoint`); a throw there (an injected fault) answers every member with the
   * storage error, as transactAlone answers its own (the replies are lost, the rows committed; a retransmission finds
   * them). Otherwise each member gets `answer` (a throw computing it rejects that member only).
   */
  private async answerCommitted(
    members: readonly Waiting[],
    crashPoint: boolean,
    answer: (w: Waiting, i: number) => Either.Either<unknown, ServiceControlError>,
  ): Promise<void> {
    let crashed: ServiceControlError | null = null;
    try {
      if (crashPoint) this.o.afterCommit?.();
    } catch (e) {
      crashed = this.o.lost(e);
    }
    for (let i = 0; i < members.length; i++) {
      const w = members[i] as Waiting;
      if (crashed !== null) w.resolve(Either.left(crashed));
      else {
        try {
          w.resolve(answer(w, i));
        } catch (e) {
          w.reject(e);
        }
      }
      if (i + 1 < members.length) await this.o.afterMember?.(i, members.length);
    }
  }

  /** The group's results after its COMMIT, or null when it was rolled back (nothing committed). */
  private async tryGroup(
    members: readonly Waiting[],
    epoch: bigint,
  ): Promise<Either.Either<unknown, ServiceControlError>[] | null> {
    let c: pg.PoolClient;
    try {
      c = await this.o.connect();
    } catch {
      return null; // each member alone meets the same storage error, as its own answer
    }
    const batch = this.o.open(c, epoch);
    try {
      const outs = await Promise.allSettled(members.map((w) => w.member.run(batch)));
      const results: Either.Either<unknown, ServiceControlError>[] = [];
      for (const o of outs) {
        if (o.status === 'rejected' || Either.isLeft(o.value)) {
          await batch.rollback();
          return null;
        }
        results.push(o.value);
      }
      try {
        await batch.commit();
      } catch (e) {
        // PostgreSQL refused a statement of the last round trip: it stopped there, the COMMIT did not run
        if (typeof (e as { code?: unknown } | null)?.code === 'string') {
          await batch.rollback();
          return null;
        }
        // the connection broke with the COMMIT on its way: whether it committed is unknown, so no member runs again —
        // each gets the storage error its own transaction would have given (decision 0330)
        const lost = this.o.lost(e);
        return members.map(() => Either.left(lost));
      }
      return results;
    } finally {
      c.release();
    }
  }
}
