export * from './api/objects.js';
export * from './domain/errors.js';
export * from './domain/resources.js';
export * from './domain/discovery.js';
export * from './domain/backoff.js';
export * from './application/kube-client.js';
export { makeClient, type ClientOptions } from './adapter/kubernetes/client.js';
export { makeTransport, type Transport } from './adapter/kubernetes/transport.js';
export * from './adapter/kubernetes/layers.js';
