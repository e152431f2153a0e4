export * from './logger.js';
export * from './launch.js';
