export * from './builtin.js';
export { digestOf } from './canonical.js';
export * from './config.js';
export * from './lifecycle.js';
export * from './read-fence.js';
export * from './resources.js';
export * from './template.js';
export * from './volume.js';
