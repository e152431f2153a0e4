export * from './controllers.js';
