// Start the load generator (client-worker.ts) on its own thread for one run: `go()` opens the timed window and
// resolves with it, `check()` with the verification of every answer. nsd's handler keeps this thread to itself.
import { Worker } from 'node:worker_threads';
import type { ClientCheck, ClientJob, ClientWindow } from './client-worker.js';

export const startLoad = async (job: ClientJob) => {
  // a worker's entry module is not seen by the parent's tsx loader: register tsx in the worker, then import it
  const entry = new URL('./client-worker.ts', import.meta.url).href;
  const worker = new Worker(`import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(entry)}); })`, { eval: true, workerData: job });
  const next = <A>() =>
    new Promise<A>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  await next(); // ready: sealed and connected
  return {
    go: async (): Promise<ClientWindow> => {
      const answered = next<{ window: ClientWindow }>();
      worker.postMessage('go');
      return (await answered).window;
    },
    check: async (): Promise<ClientCheck> => {
      const { check } = await next<{ check: ClientCheck }>();
      await worker.terminate();
      return check;
    },
  };
};
