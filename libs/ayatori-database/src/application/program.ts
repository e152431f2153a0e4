// A use case as a pure program: a generator that yields the I/O it needs (an action) and receives the observed
// fact back. Every decision between two actions is a pure function of the facts received so far, so a test can
// walk the program by feeding facts — no system, fake or real, is involved — and a driver runs the same program
// against the real ports. The one cast lives in `ask`: the driver answers each action with its declared result.

/** An action: a tagged request for one piece of I/O. Its answer type is given at the `ask` site and matched by
 * the driver's handler for that tag. */
export interface Action<Tag extends string> {
  readonly _tag: Tag;
}

export type Program<Act, R> = Generator<Act, R, unknown>;

/** Yield one action and receive its answer, typed as the action's declared answer A. */
export function* ask<Act, A>(action: Act): Generator<Act, A, unknown> {
  return (yield action) as A;
}

export interface Walk<Act, R> {
  readonly actions: ReadonlyArray<Act>;
  readonly result: R;
}

/**
 * Run a program to completion with a pure answering function (for tests and for reasoning): returns every action
 * in order and the result.
 */
export const walk = <Act, R>(
  program: Program<Act, R>,
  answer: (action: Act, index: number) => unknown,
): Walk<Act, R> => {
  const actions: Act[] = [];
  let next = program.next();
  while (!next.done) {
    actions.push(next.value);
    next = program.next(answer(next.value, actions.length - 1));
  }
  return { actions, result: next.value };
};
