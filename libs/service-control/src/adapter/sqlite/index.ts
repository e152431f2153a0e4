export * from './daemon-store.js';
