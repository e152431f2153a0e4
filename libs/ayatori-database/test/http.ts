// A raw HTTPS call with custom headers (the Table view needs its own Accept header).
import { request } from 'node:https';

export const httpCall = (url: string, options: { ca: string; headers: Record<string, string> }): Promise<{ status: number; body: string }> =>
  new Promise((resolve, reject) => {
    const req = request(new URL(url), { method: 'GET', ca: options.ca, headers: options.headers, timeout: 30_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
