export * from './daemon-store.js';
export * from './endpoint-store.js';
