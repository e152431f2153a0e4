export * from './services.js';
export * from './installer.js';
export * from './controller-set.js';
export * from './uninstall-gate.js';
export * from './capability-source.js';
