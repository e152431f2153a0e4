export * from './services.js';
export * from './installer.js';
