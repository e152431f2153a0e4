import { Either } from 'effect';
import { FIELD_MANAGER, type HeadRef } from '../api/identity.js';
import { RequestNotAllowed } from './errors.js';

/**
 * The request allow-list of the ceremony's Kubernetes client (ADR-0435: the retirement client issues only GET and
 * DELETE under /api and /apis plus the Head update). The adapter checks every request against it before sending.
 *
 * - `retirement`: GET (discovery, kube-system namespace, namespaced objects, the Head), DELETE of a namespaced object
 *   (DeleteOptions in the body, no query), PUT of exactly the Head ConfigMap.
 * - `transition` (install/upgrade/rollback): GET as above plus cluster-scoped objects, server-side apply PATCH with
 *   `fieldManager=qinglong3-catalog-lock` (and at most `force=false`), PUT of the Head, POST creating the Head, and
 *   POST creating the Head's namespace (install --create-namespace; the body names exactly that namespace).
 * Both modes may GET the Head's own namespace.
 * Everything is anchored; no `..`, no percent-encoding, no other query parameters, no other method.
 */
export type ClientMode = 'retirement' | 'transition';

const NAME = '[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?';
const GROUP = '[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?';
const VERSION = 'v[0-9]+(?:(?:alpha|beta)[0-9]+)?';
const PLURAL = '[a-z0-9]+';
const NAMESPACED_OBJECT = new RegExp(
  `^(?:/api/${VERSION}|/apis/${GROUP}/${VERSION})/namespaces/${NAME}/${PLURAL}/${NAME}$`,
);
const CLUSTER_OBJECT = new RegExp(`^(?:/api/${VERSION}|/apis/${GROUP}/${VERSION})/${PLURAL}/${NAME}$`);
const DISCOVERY = new RegExp(`^(?:/api|/apis|/api/${VERSION}|/apis/${GROUP}/${VERSION})$`);
const KUBE_SYSTEM = /^\/api\/v1\/namespaces\/kube-system$/;

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export const checkRequestAllowed = (
  mode: ClientMode,
  request: { readonly method: string; readonly path: string },
  head: HeadRef,
): Either.Either<void, RequestNotAllowed> => {
  const deny = (why: string) =>
    Either.left(
      new RequestNotAllowed({
        code: 'REQUEST_NOT_ALLOWED',
        method: request.method,
        path: request.path,
        message: `${request.method} ${request.path}: ${why}`,
      }),
    );
  const q = request.path.indexOf('?');
  const path = q < 0 ? request.path : request.path.slice(0, q);
  const query = q < 0 ? '' : request.path.slice(q + 1);
  if (path.includes('..') || path.includes('%') || path.includes('//')) return deny('path is not plain');
  const headPath = `/api/v1/namespaces/${escape(head.namespace)}/configmaps/${escape(head.name)}`;
  const isHead = new RegExp(`^${headPath}$`).test(path);
  const isHeadNamespace = path === `/api/v1/namespaces/${head.namespace}`;
  const noQuery = query === '';

  switch (request.method) {
    case 'GET':
      if (!noQuery) return deny('no query parameters are sent');
      if (DISCOVERY.test(path) || KUBE_SYSTEM.test(path) || NAMESPACED_OBJECT.test(path) || isHead || isHeadNamespace)
        return Either.void;
      if (mode === 'transition' && CLUSTER_OBJECT.test(path)) return Either.void;
      return deny('not a discovery, namespace, object or Head read');
    case 'DELETE':
      if (mode !== 'retirement') return deny('only the retirement ceremony deletes');
      if (!noQuery) return deny('DeleteOptions travel in the body, not the query');
      if (isHead) return deny('the Head is never deleted');
      return NAMESPACED_OBJECT.test(path) ? Either.void : deny('only namespaced objects are deleted');
    case 'PUT':
      return noQuery && isHead ? Either.void : deny('only the Head is updated');
    case 'POST':
      return mode === 'transition' &&
        noQuery &&
        (path === `/api/v1/namespaces/${head.namespace}/configmaps` || path === '/api/v1/namespaces')
        ? Either.void
        : deny('only the Head and its namespace are created, by install');
    case 'PATCH': {
      if (mode !== 'transition') return deny('the retirement ceremony applies nothing');
      if (isHead || !(NAMESPACED_OBJECT.test(path) || CLUSTER_OBJECT.test(path))) return deny('not an object path');
      const params = new URLSearchParams(query);
      const keys = [...params.keys()].sort();
      const ok =
        params.get('fieldManager') === FIELD_MANAGER &&
        params.getAll('fieldManager').length === 1 &&
        keys.every((k) => k === 'fieldManager' || k === 'force') &&
        params.getAll('force').every((v) => v === 'false') &&
        params.getAll('force').length <= 1;
      return ok ? Either.void : deny(`server-side apply must use fieldManager=${FIELD_MANAGER} and never force`);
    }
    default:
      return deny('method not allowed');
  }
};
