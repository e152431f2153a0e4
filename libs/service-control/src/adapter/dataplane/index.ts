// @homelab/service-control/dataplane — the data plane on kernel sockets (only ns-daemon): the SocketForwarder gated
// by the PermitEngine at every read and write, and the ListenerInstaller that binds real sockets.
export * from './socket-forwarder.js';
export * from './socket-installer.js';
export * from './socket-dataplane.js';
export * from './n6-transport.js';
