export * from './daemon-store.js';
export * from './name-store.js';
export * from './endpoint-store.js';
export * from './state-lock.js';
