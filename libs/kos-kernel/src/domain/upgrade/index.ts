export * from './digests.js';
export * from './drift.js';
export * from './machine.js';
export * from './preflight.js';
