// FakeApiServer: a plain-HTTP stand-in used ONLY to prove the client's own retry/timeout rules, which the real
// kube-apiserver cannot be made to exhibit on demand (503 bursts, silence). Nothing here backs a claim about
// Kubernetes itself. It serves minimal aggregated discovery for core/v1 ConfigMap and scripted answers.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedAnswer {
  readonly status: number;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
  /** Never answer (to provoke a client timeout). */
  readonly silent?: boolean;
}

const discoveryCore = {
  kind: 'APIGroupDiscoveryList',
  apiVersion: 'apidiscovery.k8s.io/v2',
  items: [
    {
      metadata: { name: '' },
      versions: [
        {
          version: 'v1',
          resources: [
            {
              resource: 'configmaps',
              responseKind: { group: '', version: '', kind: 'ConfigMap' },
              scope: 'Namespaced',
              verbs: ['get', 'create'],
            },
          ],
        },
      ],
    },
  ],
};
const discoveryGroups = { kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', items: [] };

export class FakeApiServer {
  readonly requests: Array<{ method: string; url: string }> = [];
  private script: Array<ScriptedAnswer> = [];
  private constructor(private readonly server: Server) {}

  static async start(): Promise<FakeApiServer> {
    const holder: { self?: FakeApiServer } = {};
    const server = createServer((req: IncomingMessage, res: ServerResponse) => holder.self?.handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    holder.self = new FakeApiServer(server);
    return holder.self;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Answers for the next object requests, in order; after the script the answer is 200 with a ConfigMap. */
  setScript(answers: ReadonlyArray<ScriptedAnswer>): void {
    this.script = [...answers];
    this.requests.length = 0;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '';
    if (url === '/api' || url === '/apis') {
      res.writeHead(200, { 'content-type': 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList' });
      res.end(JSON.stringify(url === '/api' ? discoveryCore : discoveryGroups));
      return;
    }
    req.resume();
    this.requests.push({ method: req.method ?? '', url });
    const next = this.script.shift() ?? {
      status: 200,
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'n' } },
    };
    if (next.silent) return;
    res.writeHead(next.status, { 'content-type': 'application/json', ...(next.headers ?? {}) });
    res.end(JSON.stringify(next.body ?? { kind: 'Status', code: next.status, message: `scripted ${next.status}` }));
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}
