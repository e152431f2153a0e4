export * from './authority-store.js';
export * from './probe.js';
export * from './reshard.js';
export * from './lease-renewer.js';
