// Start the load generator (client-worker.ts) on its own thread for one run: `go()` opens the timed window and
// resolves with it, `check()` with the verification of every answer. nsd's handler keeps this thread to itself.
import { Worker } from 'node:worker_threads';
import type { ClientCheck, ClientJob, ClientWindow } from './client-worker.js';
import { type MachineCpu, machineCpuSince, machineTicks } from './pg.js';

/** Longest silence of the load generator in one step (connect, a run's window, the answers' checks). */
const STEP_TIMEOUT_MS = 180_000;

export const startLoad = async (job: ClientJob) => {
  // a worker's entry module is not seen by the parent's tsx loader: register tsx in the worker, then import it
  const entry = new URL('./client-worker.ts', import.meta.url).href;
  const worker = new Worker(
    `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(entry)}); })`,
    { eval: true, workerData: job },
  );
  // every message is buffered from the start: a message that arrives with no listener is lost (the worker would then
  // exit before the next step asks — decision 0630's productions made that happen when the check came unasked)
  const inbox: unknown[] = [];
  let waiter: ((m: unknown) => void) | null = null;
  worker.on('message', (m: unknown) => {
    if (waiter === null) inbox.push(m);
    else {
      const w = waiter;
      waiter = null;
      w(m);
    }
  });
  let exited: Error | null = null;
  worker.once(
    'exit',
    (code) => (exited = new Error(`the load-generator thread exited (code ${code}) before it answered`)),
  );
  /**
   * The worker's next message; fails when it errs, exits without answering, or stays silent for STEP_TIMEOUT_MS (a
   * run that never answers — a lost connection, a request nsd never replies to — fails with a reason, not a hang).
   */
  const next = <A>() =>
    new Promise<A>((resolve, reject) => {
      if (inbox.length > 0) return resolve(inbox.shift() as A);
      if (exited !== null) return reject(exited);
      const fail = (e: Error) => {
        cleanup();
        reject(e);
      };
      const onMessage = (m: unknown) => {
        cleanup();
        resolve(m as A);
      };
      const onExit = (code: number) =>
        fail(new Error(`the load-generator thread exited (code ${code}) before it answered`));
      const timer = setTimeout(
        () =>
          fail(
            new Error(
              `the load-generator thread sent nothing for ${STEP_TIMEOUT_MS / 1000} s (a request without an answer?)`,
            ),
          ),
        STEP_TIMEOUT_MS,
      );
      const cleanup = () => {
        clearTimeout(timer);
        waiter = null;
        worker.off('error', fail);
        worker.off('exit', onExit);
      };
      waiter = onMessage;
      worker.on('error', fail);
      worker.on('exit', onExit);
    });
  await next(); // ready: sealed and connected
  return {
    /** The timed window, with the whole machine's CPU per request over it (clients, nsd, PostgreSQL). */
    go: async (): Promise<ClientWindow & { readonly machine: MachineCpu }> => {
      const answered = next<{ window: ClientWindow }>();
      const m0 = machineTicks();
      worker.postMessage('go');
      const { window } = await answered;
      return { ...window, machine: machineCpuSince(m0, window.requests) };
    },
    /** Every answer verified (on the load generator's thread, after the caller's readings of the window). */
    check: async (): Promise<ClientCheck> => {
      worker.postMessage('verify');
      const { check } = await next<{ check: ClientCheck }>();
      await worker.terminate();
      return check;
    },
  };
};
