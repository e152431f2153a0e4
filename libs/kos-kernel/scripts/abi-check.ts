// ABI self-check of a cluster: `npm run abi-check -w @homelab/kos-kernel` (KUBECONFIG, or the running test bed's
// state file via HOMELAB_TESTBED_STATE). Exit 0 when the ABI holds, 1 with one line per violation otherwise.
import { Effect, Layer } from 'effect';
import { layerFromKubeconfigFile, layerFromTestbedState } from '@homelab/kube';
import { checkClusterAbi } from '../src/index.js';

/** This command's output (a CLI: its lines are the result, not a log). */
const print = (...parts: ReadonlyArray<unknown>): void => void process.stdout.write(`${parts.map(String).join(' ')}\n`);

const kubeconfig = process.env['KUBECONFIG'];
const layer = kubeconfig
  ? layerFromKubeconfigFile(kubeconfig)
  : layerFromTestbedState(process.env['HOMELAB_TESTBED_STATE'] ?? '.testbed/state.json');
const report = await Effect.runPromise(checkClusterAbi.pipe(Effect.provide(Layer.orDie(layer))));
for (const v of report.violations) print(`violation ${v.code}: ${v.message}`);
for (const w of report.otherWebhooks) print(`note: webhook ${w} does not intercept kos.tsic.top`);
print(
  report.ok
    ? 'ABI self-check passed: ten kinds, scopes, equal versions, storage v1beta1, conversion None, no webhooks'
    : `ABI self-check failed: ${report.violations.length} violation(s)`,
);
process.exitCode = report.ok ? 0 : 1;
