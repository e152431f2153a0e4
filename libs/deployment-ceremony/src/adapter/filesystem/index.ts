export * from './receipt-store.js';
