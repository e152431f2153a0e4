// The routes of extension pages and settings (decision 0345): `GET /api/v1/pages`, `GET /api/v1/settings[?node=]`,
// `PUT /api/v1/settings/{id}`. Kept beside router.ts so the extension surfaces grow without touching its table.
import { Effect } from 'effect';
import { listPages, listSettings, putSetting } from '../../application/control-plane/extension-surfaces.js';
import type { Auditor, Authorizer } from '../../application/control-plane/services.js';
import { json, parseBody, type Route } from './messages.js';

const auth = (headers: Readonly<Record<string, string | undefined>>) =>
  headers['authorization'] !== undefined ? { authorization: headers['authorization'] } : {};

export const EXTENSION_SURFACE_ROUTES: ReadonlyArray<Route<Authorizer | Auditor>> = [
  {
    pattern: /^\/api\/v1\/pages$/,
    methods: { GET: (_m, _q, req) => listPages(auth(req.headers)).pipe(Effect.map((p) => json(200, p))) },
  },
  {
    pattern: /^\/api\/v1\/settings$/,
    methods: {
      GET: (_m, q, req) =>
        listSettings({
          ...auth(req.headers),
          ...(q.get('node') !== null ? { node: q.get('node') as string } : {}),
        }).pipe(Effect.map((s) => json(200, s))),
    },
  },
  {
    pattern: /^\/api\/v1\/settings\/([^/]+)$/,
    methods: {
      PUT: (m, _q, req) =>
        Effect.flatMap(parseBody(req), (body) =>
          putSetting({ ...auth(req.headers), id: decodeURIComponent(m[1] as string), body }),
        ).pipe(Effect.map((a) => json(200, a))),
    },
  },
];
