export * from './authority-store.js';
export * from './probe.js';
