export { startTestbed, type StartOptions } from './testbed.js';
export { TestbedState, defaultStateFile, readState, shellExports } from './state.js';
export { TestbedError } from './errors.js';
export { versions, binaryPaths, cacheRoot } from './versions.js';
export { ensureBinary, type BinaryName } from './binaries.js';
export { writeBusyboxImage, type BusyboxImageSpec, type ImageFiles } from './images.js';
export { importImages, hostPathStorageClass, pidsOf } from './node.js';
export { netnsDown, netnsLayout, netnsList, netnsUp, type NetnsLayout, type NetnsNode } from './netns.js';
