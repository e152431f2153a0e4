// Images made here without a registry: one layer holding Debian's busybox-static (plus its applet links, /etc/passwd
// and /tmp) and any files a caller adds, written as an OCI image-layout tarball that `ctr images import` reads — the
// node's pause and busybox images, and the stand-ins tests build on top (`writeBusyboxImage`).
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Effect } from 'effect';
import { TestbedError } from './errors.js';

export const busyboxBinary = '/bin/busybox';

/** The image names pods use (with `imagePullPolicy: Never`: nothing can be pulled here). */
export interface NodeImages {
  readonly pause: string;
  readonly busybox: string;
}

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

/** BusyBox's version as it prints it ("BusyBox v1.35.0 (Debian …)"), for the image tag. */
export const busyboxVersion = (): string => {
  const banner = execFileSync(busyboxBinary, ['--help'], { encoding: 'utf8' }).split('\n')[0] ?? '';
  return /BusyBox v([0-9.]+)/.exec(banner)?.[1] ?? 'unknown';
};

const ociArch = (): string => (process.arch === 'x64' ? 'amd64' : process.arch);

/**
 * Writes one OCI image-layout tarball `<dir>/<file>` with a single uncompressed layer made from `rootfs` and the
 * given process config; `name` is the full reference containerd registers (`io.containerd.image.name`).
 */
const writeOciTarball = (
  dir: string,
  file: string,
  rootfs: string,
  name: string,
  config: Record<string, unknown>,
): string => {
  const layout = join(dir, `${file}.layout`);
  const blobs = join(layout, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const layerFile = join(dir, `${file}.layer.tar`);
  execFileSync('tar', [
    '--numeric-owner',
    '--owner=0',
    '--group=0',
    '--sort=name',
    '-C',
    rootfs,
    '-cf',
    layerFile,
    '.',
  ]);
  const layer = readFileSync(layerFile);
  const layerDigest = sha256(layer);
  writeFileSync(join(blobs, layerDigest), layer);
  const configBlob = Buffer.from(
    JSON.stringify({
      architecture: ociArch(),
      os: 'linux',
      config,
      rootfs: { type: 'layers', diff_ids: [`sha256:${layerDigest}`] },
    }),
  );
  const configDigest = sha256(configBlob);
  writeFileSync(join(blobs, configDigest), configBlob);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: {
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: `sha256:${configDigest}`,
        size: configBlob.length,
      },
      layers: [
        { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: `sha256:${layerDigest}`, size: layer.length },
      ],
    }),
  );
  const manifestDigest = sha256(manifest);
  writeFileSync(join(blobs, manifestDigest), manifest);
  writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(layout, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          digest: `sha256:${manifestDigest}`,
          size: manifest.length,
          platform: { architecture: ociArch(), os: 'linux' },
          annotations: {
            'io.containerd.image.name': name,
            'org.opencontainers.image.ref.name': name.slice(name.lastIndexOf(':') + 1),
          },
        },
      ],
    }),
  );
  const out = join(dir, file);
  execFileSync('tar', ['-C', layout, '-cf', out, 'oci-layout', 'index.json', 'blobs']);
  return out;
};

/** Files added on top of the busybox root file system (path inside the image → content; mode 0644 unless given). */
export type ImageFiles = Readonly<Record<string, { readonly content: string; readonly mode?: number }>>;

/**
 * One image made of Debian's busybox-static (every applet linked in /bin, /etc/passwd, /etc/group, /tmp) plus
 * `files`, with the given process config (`Entrypoint`, `Cmd`, `Env`, `WorkingDir`; `Env` defaults to PATH=/bin).
 */
export interface BusyboxImageSpec {
  /** The full reference containerd registers, e.g. `docker.io/library/nginx:1.27.3-alpine`. */
  readonly name: string;
  readonly files?: ImageFiles;
  readonly config?: Readonly<Record<string, unknown>>;
}

const busyboxRootfs = (rootfs: string, files: ImageFiles = {}): void => {
  mkdirSync(join(rootfs, 'bin'), { recursive: true });
  mkdirSync(join(rootfs, 'etc'), { recursive: true });
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  chmodSync(join(rootfs, 'tmp'), 0o1777);
  copyFileSync(busyboxBinary, join(rootfs, 'bin', 'busybox'));
  chmodSync(join(rootfs, 'bin', 'busybox'), 0o755);
  const applets = execFileSync(busyboxBinary, ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const applet of applets) if (applet !== 'busybox') symlinkSync('busybox', join(rootfs, 'bin', applet));
  writeFileSync(
    join(rootfs, 'etc', 'passwd'),
    'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n',
  );
  writeFileSync(join(rootfs, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');
  for (const [path, file] of Object.entries(files)) {
    const target = join(rootfs, path);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, file.content);
    chmodSync(target, file.mode ?? 0o644);
  }
};

/**
 * Writes the image of `spec` as an OCI image-layout tarball `<dir>/<file>` (≈ 2 MB, well under a second) that
 * `ctr images import` (and `testbed images import`) reads; returns its path.
 */
export const writeBusyboxImage = (dir: string, file: string, spec: BusyboxImageSpec): string => {
  const rootfs = join(dir, `${file}.rootfs`);
  rmSync(rootfs, { recursive: true, force: true });
  busyboxRootfs(rootfs, spec.files);
  return writeOciTarball(dir, file, rootfs, spec.name, { Env: ['PATH=/bin'], ...spec.config });
};

/**
 * Builds the pause and busybox images into `dir` (two tarballs) and returns their names and files. pause is
 * busybox's shell waiting forever and exiting on TERM/INT, which is all a pod sandbox's pause process does here (no
 * shared PID namespace, so there is nothing to reap).
 */
export const buildNodeImages = (
  dir: string,
): Effect.Effect<{ readonly images: NodeImages; readonly tarballs: ReadonlyArray<string> }, TestbedError> =>
  Effect.try({
    try: () => {
      const version = busyboxVersion();
      const images: NodeImages = {
        pause: `testbed.local/pause:busybox-${version}`,
        busybox: `testbed.local/busybox:${version}`,
      };
      const pause = writeBusyboxImage(dir, 'pause.tar', {
        name: images.pause,
        config: { Entrypoint: ['/bin/sh', '-c', "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"] },
      });
      const busybox = writeBusyboxImage(dir, 'busybox.tar', { name: images.busybox, config: { Cmd: ['sh'] } });
      return { images, tarballs: [pause, busybox] };
    },
    catch: (e) =>
      new TestbedError({ component: 'node', reason: `building the pause and busybox images: ${String(e)}` }),
  });
