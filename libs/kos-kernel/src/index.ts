export * from './api/group.js';
export * as v1alpha1 from './api/v1alpha1/kinds.js';
export * as v1beta1 from './api/v1beta1/kinds.js';
export * from './api/crds.js';
export * from './domain/abi.js';
