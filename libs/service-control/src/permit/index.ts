// @homelab/service-control/permit — the pure flow-permit decision library (spec §6). No I/O: the boot-time clock
// and the ordinary policy are injected (a Linux clock adapter lives at @homelab/service-control/clock).
export * from './clock.js';
export * from './types.js';
export * from './receipt.js';
export * from './engine.js';
export * from './dataplane.js';
export * from './simulated-forwarder.js';
