export * from './operator-host.js';
