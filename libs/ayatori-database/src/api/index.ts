export * from './common.js';
export * from './crd-annotations.js';
export * from './database.js';
export * from './instance.js';
export * from './tenant.js';
export * from './transition-rules.js';
