export * from './api/index.js';
export * from './domain/index.js';
export * from './application/index.js';
