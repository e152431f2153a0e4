// @homelab/service-control/clock (subpath export to be added by the lead) — the real boot-time clock adapter.
export * from './proc-uptime.js';
export * from './turn-clock.js';
export * from './suspend-checked.js';
