export * from './pack.js';
export * from './examples.js';
export * from './consumer.js';
export * from './images.js';
