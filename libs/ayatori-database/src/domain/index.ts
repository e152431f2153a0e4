export * as Binding from './binding.js';
export * from './conditions.js';
export * from './credential-location.js';
export * from './instance.js';
export * from './instance-reasons.js';
export * from './ip.js';
export * from './presentation.js';
export * from './vocabulary.js';
export * from './provisioning-sql.js';
