export type * from './api/manifest.js';
export * from './domain/annotations.js';
export * from './domain/errors.js';
export * from './domain/openapi.js';
export * from './domain/resource.js';
export * from './domain/crd.js';
export * from './domain/render.js';
export * from './domain/drift.js';
export * from './adapter/file/manifests.js';
