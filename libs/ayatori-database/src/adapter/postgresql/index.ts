export * from './connection.js';
export * from './observer.js';
