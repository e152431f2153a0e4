// Model-based property tests of the work-queue contract (fast-check commands against an explicit model).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue.js';

interface Model {
  queue: Array<string>;
  dirty: Set<string>;
  processing: Set<string>;
}
type Real = QueueCore<string>;

const check = (m: Model, r: Real) => {
  expect(r.snapshot()).toEqual(m.queue);
  expect(r.length).toBe(m.queue.length);
  expect(r.processingCount).toBe(m.processing.size);
  // invariants of the contract
  expect(new Set(r.snapshot()).size).toBe(r.length); // never twice in the ready queue
  for (const k of r.snapshot()) expect(r.isProcessing(k)).toBe(false); // nothing queued is being processed
};

class AddCmd implements fc.Command<Model, Real> {
  constructor(readonly key: string) {}
  check = () => true;
  run(m: Model, r: Real) {
    r.add(this.key);
    if (!m.dirty.has(this.key)) {
      m.dirty.add(this.key);
      if (!m.processing.has(this.key)) m.queue.push(this.key);
    }
    check(m, r);
  }
  toString = () => `add(${this.key})`;
}

class GetCmd implements fc.Command<Model, Real> {
  check = (m: Readonly<Model>) => m.queue.length > 0;
  run(m: Model, r: Real) {
    const expected = m.queue.shift() as string;
    const got = r.get();
    expect(got?.key).toBe(expected);
    // the key handed out was not being processed by anyone else
    expect(m.processing.has(expected)).toBe(false);
    m.processing.add(expected);
    m.dirty.delete(expected);
    check(m, r);
  }
  toString = () => 'get';
}

class EmptyGetCmd implements fc.Command<Model, Real> {
  check = (m: Readonly<Model>) => m.queue.length === 0;
  run(m: Model, r: Real) {
    expect(r.get()).toBeUndefined();
    check(m, r);
  }
  toString = () => 'get(empty)';
}

class DoneCmd implements fc.Command<Model, Real> {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.processing.size > 0;
  run(m: Model, r: Real) {
    const keys = [...m.processing];
    const key = keys[this.pick % keys.length] as string;
    const requeued = r.done(key);
    m.processing.delete(key);
    // re-added while processing ⇒ processed again after
    expect(requeued).toBe(m.dirty.has(key));
    if (m.dirty.has(key)) m.queue.push(key);
    check(m, r);
  }
  toString = () => `done(#${this.pick})`;
}

const keys = fc.constantFrom('a', 'b', 'c', 'ns/d', 'ns/e');
const commands = [
  keys.map((k) => new AddCmd(k)),
  fc.constant(new GetCmd()),
  fc.constant(new EmptyGetCmd()),
  fc.nat(10).map((n) => new DoneCmd(n)),
];

describe('QueueCore (work-queue contract)', () => {
  it('matches the model: dedupe while queued, one worker per key, re-add while processing ⇒ again after', () => {
    fc.assert(
      fc.property(fc.commands(commands, { size: '+1' }), (cmds) => {
        fc.modelRun(
          () => ({
            model: { queue: [], dirty: new Set<string>(), processing: new Set<string>() },
            real: new QueueCore<string>(),
          }),
          cmds,
        );
      }),
      { numRuns: 300 },
    );
  });

  it('delayed adds keep the earliest time and are promoted when due', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(keys, fc.integer({ min: 0, max: 1000 })), { maxLength: 40 }),
        fc.integer({ min: 0, max: 1000 }),
        (adds, now) => {
          const q = new QueueCore<string>();
          const earliest = new Map<string, number>();
          for (const [k, at] of adds) {
            q.addAt(k, at);
            earliest.set(k, Math.min(at, earliest.get(k) ?? Infinity));
          }
          const moved = new Set(q.promote(now));
          for (const [k, at] of earliest) expect(moved.has(k)).toBe(at <= now);
          expect(new Set(q.snapshot())).toEqual(moved);
          const rest = [...earliest.values()].filter((at) => at > now);
          expect(q.nextReadyAt()).toBe(rest.length ? Math.min(...rest) : undefined);
        },
      ),
    );
  });
});
