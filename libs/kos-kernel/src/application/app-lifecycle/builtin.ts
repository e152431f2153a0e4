// The five built-in ApplicationDefinitions are written at start (subject `catalogue-sync`, the writer of
// definitions; server-side apply, so a restart with unchanged content writes nothing new).
import { Effect } from 'effect';
import { type KubeClient, type KubeError, type KubeObject } from '@homelab/kube';
import { BUILTIN_DEFINITIONS } from '../../domain/application/builtin.js';
import type { WriteRejected } from '../../domain/write-path.js';
import { applyAs } from '../writer.js';

export const installBuiltinDefinitions: Effect.Effect<
  ReadonlyArray<KubeObject>,
  KubeError | WriteRejected,
  KubeClient
> = Effect.forEach(BUILTIN_DEFINITIONS, (d) =>
  Effect.map(
    applyAs({
      subject: 'catalogue-sync',
      target: 'ApplicationDefinition',
      part: 'spec',
      object: d as unknown as KubeObject,
    }),
    (w) => w.object,
  ),
);
