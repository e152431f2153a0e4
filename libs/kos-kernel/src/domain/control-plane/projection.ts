// Read projections (seed 000: 读投影每项带 observedAt 与 stale；陈旧阈值是 controlplane.StaleThreshold（2 分钟），所有
// 来源共用。确知发现来源时，投影的 sources 列出全部上报的适配器标识). Pure: `now` is a parameter.
import type { Projection } from '../../api/http/bodies.js';

/** controlplane.StaleThreshold: one threshold for every source. */
export const STALE_THRESHOLD_MS = 2 * 60 * 1000;

export const isStale = (observedAtMs: number, nowMs: number, thresholdMs: number = STALE_THRESHOLD_MS): boolean =>
  nowMs - observedAtMs > thresholdMs;

interface Observed {
  readonly kind: string;
  readonly spec?: unknown;
}

/**
 * When the facts in an object were observed (decision 0092): a kind whose spec carries its collector's observation
 * time (NodeDevice `spec.observedAt`, C-70) is as old as that; any other object was observed when the control plane
 * read it from the API server.
 */
export const observedAtOf = (object: Observed, readAtMs: number): number => {
  if (object.kind === 'NodeDevice') {
    const at = (object.spec as { observedAt?: unknown } | undefined)?.observedAt;
    if (typeof at === 'string') {
      const ms = Date.parse(at);
      if (!Number.isNaN(ms)) return Math.min(ms, readAtMs);
    }
  }
  return readAtMs;
};

export const project = (
  object: Observed,
  input: {
    readonly readAtMs: number;
    readonly nowMs: number;
    readonly sources: ReadonlyArray<string>;
    readonly thresholdMs?: number;
  },
): Projection => {
  const observed = observedAtOf(object, input.readAtMs);
  return {
    object,
    observedAt: new Date(observed).toISOString(),
    stale: isStale(observed, input.nowMs, input.thresholdMs),
    sources: [...new Set(input.sources)].sort(),
  };
};
