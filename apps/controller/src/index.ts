export * from './config.js';
export * from './metrics.js';
export * from './server.js';
