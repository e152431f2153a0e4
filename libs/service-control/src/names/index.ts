// @homelab/service-control/names — local names (Short DNS, seed §7): the automatic-name space, the table's pure
// plans, the storage port with an in-memory table, the resolver's answer function and the `LocalNames` service.
// The durable store is in `@homelab/service-control/sqlite` (`openSqliteNameStore`).
export * from './errors.js';
export * from './format.js';
export * from './memory.js';
export * from './random.js';
export * from './resolver.js';
export * from './selector.js';
export * from './service.js';
export * from './store.js';
export * from './table.js';
