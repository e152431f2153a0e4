// The node's stand-in images cover every image reference of the built-in definitions (a new built-in app, or a new
// image tag in one, without a stand-in would leave its pods in ErrImageNeverPull/ImagePullBackOff on the node).
import { describe, expect, it } from 'vitest';
import { BUILTIN_DEFINITIONS } from '../src/index.js';
import { imagesOf, standInImages } from './stand-in-images.js';

describe('stand-in images for the built-in apps on the test bed node', () => {
  it('every image a built-in definition names has exactly one stand-in, and there are no others', () => {
    const referenced = [...new Set(BUILTIN_DEFINITIONS.flatMap((d) => imagesOf(d.spec)))].sort();
    expect(referenced).toContain('docker.io/library/busybox:1.37.0'); // init containers are walked too
    expect(standInImages.map((i) => i.name).sort()).toEqual(referenced);
  });
});
