export * from './builtin.js';
export * from './reads.js';
export * from './downstream.js';
export * from './reconcile.js';
export * from './records.js';
export * from './services.js';
export * from './volume-endpoint.js';
export * from './upgrade.js';
