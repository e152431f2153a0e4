export * from './services.js';
export * from './installer.js';
export * from './controller-set.js';
