export * from './credentials.js';
