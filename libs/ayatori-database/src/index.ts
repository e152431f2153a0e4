export * as Api from './api/index.js';
export * as Application from './application/index.js';
export * as Domain from './domain/index.js';
export * as KubernetesAdapter from './adapter/kubernetes/index.js';
export * as OpenBaoAdapter from './adapter/openbao/index.js';
export * as PostgreSQLAdapter from './adapter/postgresql/index.js';
export * as Controller from './controller/index.js';
