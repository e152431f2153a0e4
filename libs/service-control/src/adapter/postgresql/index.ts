export * from './authority-store.js';
