// Process helpers the multi-process nsd benches share (failover, shard).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** User + system CPU seconds of a process (/proc; 100 ticks a second). */
export const cpuSeconds = (pid: number | undefined): number => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(f[11]) + Number(f[12])) / 100;
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
