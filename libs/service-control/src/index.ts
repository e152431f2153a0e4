export * from './domain/errors.js';
