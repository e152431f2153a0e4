export * as Api from './api/index.js';
