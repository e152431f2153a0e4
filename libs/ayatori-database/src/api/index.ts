export * from './common.js';
export * from './crds.js';
export * from './database.js';
export * from './instance.js';
export * from './rbac.js';
export * from './tenant.js';
export * from './transition-rules.js';
