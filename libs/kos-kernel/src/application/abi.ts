// The ABI self-check against a live cluster: list the CRDs and the admission webhook configurations through
// @homelab/kube and judge them with the pure checkAbi.
import { Effect } from 'effect';
import { KubeClient, type KubeError } from '@homelab/kube';
import { type AbiReport, checkAbi, type CrdLike, type WebhookConfigurationLike } from '../domain/abi.js';

export const checkClusterAbi: Effect.Effect<AbiReport, KubeError, KubeClient> = Effect.gen(function* () {
  const client = yield* KubeClient;
  const [crds, validating, mutating] = yield* Effect.all(
    [
      client.listAll({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition' }),
      client.listAll({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration' }),
      client.listAll({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration' }),
    ],
    { concurrency: 3 },
  );
  return checkAbi({
    crds: crds.items as unknown as ReadonlyArray<CrdLike>,
    webhookConfigurations: [
      ...validating.items.map((w) => ({
        ...(w as unknown as WebhookConfigurationLike),
        kind: 'ValidatingWebhookConfiguration',
      })),
      ...mutating.items.map((w) => ({
        ...(w as unknown as WebhookConfigurationLike),
        kind: 'MutatingWebhookConfiguration',
      })),
    ],
  });
});
