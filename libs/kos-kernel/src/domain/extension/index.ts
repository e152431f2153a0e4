export * from './version.js';
export * from './baseline.js';
export * from './declaration.js';
export * from './load.js';
export * from './registry.js';
export * from './status.js';
export * from './write-scope.js';
export * from './controllers.js';
