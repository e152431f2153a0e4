export * from './identity.js';
export * from './manifest.js';
export * from './head.js';
export * from './retirement.js';
export * from './abandon.js';
