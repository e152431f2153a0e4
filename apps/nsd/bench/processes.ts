// Process helpers the multi-process nsd benches share (failover, shard).
import { readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';

/** User + system CPU seconds of a process (/proc; 100 ticks a second). */
export const cpuSeconds = (pid: number | undefined): number => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(f[11]) + Number(f[12])) / 100;
};

/** User + system CPU seconds of each thread of a process, by thread id (/proc/<pid>/task). */
export const threadCpuSeconds = (pid: number | undefined): Map<number, number> => {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      out.set(Number(tid), (Number(f[11]) + Number(f[12])) / 100);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
};

/** A free TCP port on 127.0.0.1, chosen by the kernel. */
export const freePort = (): Promise<number> =>
  new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
