export * from './ports.js';
export * from './head-store.js';
export * from './preflight.js';
export * from './apply.js';
export * from './audit.js';
export * from './transitions.js';
export { verifyEnvironment } from './shared.js';
export * from './abandon.js';
