import { Cause, Exit, Option } from 'effect';

/** The typed failure of an exit (undefined when it succeeded or died). */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined;

/** Did the exit die of a simulated crash? */
export const crashed = <A, E>(exit: Exit.Exit<A, E>): boolean =>
  Exit.isFailure(exit) &&
  Option.exists(
    Cause.dieOption(exit.cause),
    (d) => typeof d === 'object' && d !== null && (d as { _tag?: string })._tag === 'SimulatedCrash',
  );
