export * from './connection.js';
export * from './observer.js';
export * from './provisioner.js';
