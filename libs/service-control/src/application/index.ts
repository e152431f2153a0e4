export * from './authority-store.js';
export * from './authority.js';
export * from './daemon-store.js';
export * from './daemon.js';
export * from './port-arbiter.js';
export * from './authority-lease.js';
export * from './lease-store.js';
