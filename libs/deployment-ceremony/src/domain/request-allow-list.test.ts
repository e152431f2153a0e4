import { Either } from 'effect';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEAD_REF } from '../api/identity.js';
import { checkRequestAllowed, type ClientMode } from './request-allow-list.js';

const allowed = (mode: ClientMode, method: string, path: string) =>
  Either.isRight(checkRequestAllowed(mode, { method, path }, DEFAULT_HEAD_REF));
const HEAD = '/api/v1/namespaces/qinglong-system/configmaps/qinglong-deployment-head';

describe('request allow-list of the ceremony client', () => {
  it('retirement: GET discovery / kube-system / namespaced objects / Head, DELETE namespaced objects, PUT the Head', () => {
    for (const p of [
      '/api',
      '/api/v1',
      '/apis',
      '/apis/apps/v1',
      '/api/v1/namespaces/kube-system',
      '/api/v1/namespaces/q/configmaps/a',
      '/apis/apps/v1/namespaces/q/deployments/w',
      HEAD,
    ]) {
      expect(allowed('retirement', 'GET', p), p).toBe(true);
    }
    expect(allowed('retirement', 'DELETE', '/api/v1/namespaces/q/configmaps/a')).toBe(true);
    expect(allowed('retirement', 'DELETE', '/apis/example.com/v1beta1/namespaces/q/widgets/a.b')).toBe(true);
    expect(allowed('retirement', 'PUT', HEAD)).toBe(true);
  });

  it('retirement refuses: PATCH/POST, any other PUT, deleting the Head or cluster-scoped objects, queries, traversal', () => {
    expect(
      allowed('retirement', 'PATCH', '/api/v1/namespaces/q/configmaps/a?fieldManager=qinglong3-catalog-lock'),
    ).toBe(false);
    expect(allowed('retirement', 'POST', '/api/v1/namespaces/qinglong-system/configmaps')).toBe(false);
    expect(allowed('retirement', 'PUT', '/api/v1/namespaces/q/configmaps/a')).toBe(false);
    expect(allowed('retirement', 'DELETE', HEAD)).toBe(false);
    expect(allowed('retirement', 'DELETE', '/apis/rbac.authorization.k8s.io/v1/clusterroles/x')).toBe(false);
    expect(allowed('retirement', 'DELETE', '/api/v1/namespaces/q')).toBe(false);
    expect(allowed('retirement', 'DELETE', '/api/v1/namespaces/q/configmaps/a?gracePeriodSeconds=0')).toBe(false);
    expect(allowed('retirement', 'DELETE', '/api/v1/namespaces/q/configmaps')).toBe(false); // collection delete
    expect(allowed('retirement', 'GET', '/api/v1/namespaces/q/configmaps/a?watch=true')).toBe(false);
    expect(allowed('retirement', 'GET', '/api/v1/namespaces/q/configmaps/../secrets/s')).toBe(false);
    expect(allowed('retirement', 'GET', '/api/v1/namespaces/q/configmaps/a%2Fb')).toBe(false);
    expect(allowed('retirement', 'GET', '/apis/apps/v1/clusterroles/x')).toBe(false);
    expect(allowed('retirement', 'GET', '/healthz')).toBe(false);
    expect(allowed('retirement', 'OPTIONS', '/api')).toBe(false);
  });

  it('transition: server-side apply only under qinglong3-catalog-lock without force; POST only the Head create; no DELETE', () => {
    expect(
      allowed('transition', 'PATCH', '/apis/apps/v1/namespaces/q/deployments/w?fieldManager=qinglong3-catalog-lock'),
    ).toBe(true);
    expect(
      allowed(
        'transition',
        'PATCH',
        '/apis/apps/v1/namespaces/q/deployments/w?fieldManager=qinglong3-catalog-lock&force=false',
      ),
    ).toBe(true);
    expect(
      allowed(
        'transition',
        'PATCH',
        '/apis/rbac.authorization.k8s.io/v1/clusterroles/x?fieldManager=qinglong3-catalog-lock',
      ),
    ).toBe(true);
    expect(
      allowed(
        'transition',
        'PATCH',
        '/apis/apps/v1/namespaces/q/deployments/w?fieldManager=qinglong3-catalog-lock&force=true',
      ),
    ).toBe(false);
    expect(allowed('transition', 'PATCH', '/apis/apps/v1/namespaces/q/deployments/w?fieldManager=kubectl')).toBe(false);
    expect(allowed('transition', 'PATCH', `${HEAD}?fieldManager=qinglong3-catalog-lock`)).toBe(false);
    expect(allowed('transition', 'POST', '/api/v1/namespaces/qinglong-system/configmaps')).toBe(true);
    expect(allowed('transition', 'POST', '/api/v1/namespaces/other/configmaps')).toBe(false);
    expect(allowed('transition', 'DELETE', '/api/v1/namespaces/q/configmaps/a')).toBe(false);
    expect(allowed('transition', 'GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles/x')).toBe(true);
    expect(allowed('transition', 'PATCH', '/api/v1/namespaces/qinglong?fieldManager=qinglong3-catalog-lock')).toBe(
      true,
    ); // a Namespace object
  });
});
