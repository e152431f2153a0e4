export * from './envelope.js';
export * from './replay.js';
export * from './sse.js';
export * from './http.js';
