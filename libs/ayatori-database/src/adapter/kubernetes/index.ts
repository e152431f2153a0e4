export * from './resources.js';
export * from './provisioning.js';
