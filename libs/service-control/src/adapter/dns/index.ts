// @homelab/service-control/dns — the local names served over DNS (spec §7, M6-57; decision 0175): the RFC 1035
// codec and the query → reply mapping (pure), and the loopback UDP/TCP listener. Answers come from `names/resolver.ts`.
export * from './client.js';
export * from './message.js';
export * from './respond.js';
export * from './server.js';
