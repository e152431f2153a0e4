export * from './pack.js';
export * from './examples.js';
export * from './consumer.js';
