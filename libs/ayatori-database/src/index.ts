export * as Api from './api/index.js';
export * as Application from './application/index.js';
export * as Domain from './domain/index.js';
