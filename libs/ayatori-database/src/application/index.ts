export * from './binding.js';
export * from './instance.js';
export * from './ports.js';
export * from './program.js';
export * from './mapping.js';
export * from './observation.js';
export * from './credentials.js';
export * from './provisioning.js';
