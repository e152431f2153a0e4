// The command line of nsd and ns-daemon. Launching their layer graphs and their log line are @homelab/process's
// (shared with the controller, decision 0291).
export * from './command-line.js';
