import { Data } from 'effect';

/** Any failure to build, start, probe or stop a test-bed service. `logFile` points at the evidence. */
export class TestbedError extends Data.TaggedError('TestbedError')<{
  readonly component:
    | 'etcd'
    | 'kube-apiserver'
    | 'kube-controller-manager'
    | 'openbao'
    | 'postgresql'
    | 'binaries'
    | 'state'
    | 'pki'
    | 'kube-scheduler'
    | 'containerd'
    | 'kubelet'
    | 'node';
  readonly reason: string;
  readonly logFile?: string;
}> {
  override get message(): string {
    return `test bed ${this.component}: ${this.reason}${this.logFile ? ` (log: ${this.logFile})` : ''}`;
  }
}
