// Stand-ins for the built-in apps' images on the test bed's node (issue 27, decision 0271). Nothing can be pulled here
// (no registry, and the real images are hundreds of MB), so each image reference a built-in definition names is
// imported into the node's containerd under that very reference, built from busybox plus a small shell script that
// behaves like the app as far as the tests look: it listens on the app's port, answers a request, keeps redis keys on
// its /data volume, runs the migration hook and exits 0, and exits at once on SIGTERM. The definitions are not
// changed: the kernel renders exactly what it renders in production, and the kubelet finds the image present
// (`IfNotPresent`, the default for a tagged reference). These are fakes of the apps, named as such; the node, the
// controllers, the volumes and the pods are real.
import type { BusyboxImageSpec } from '@homelab/testbed/vitest';

const script = (body: string) => ({ content: `#!/bin/sh\n${body.trim()}\n`, mode: 0o755 });

/** Run the server in the background and exit 0 on TERM/INT (a shell as PID 1 would otherwise ignore TERM). */
const supervise = (command: string) => `${command} &
pid=$!
trap 'kill $pid 2>/dev/null; exit 0' TERM INT
wait $pid`;

/** busybox httpd on `port` serving a one-line page, /healthcheck → OK (miniflux's probe path) and /healthz (n8n's). */
const servePage = (name: string, port: number) =>
  script(`
echo "stand-in ${name} (test bed): serving on :${port}, args: $*"
mkdir -p /tmp/www
echo "<!doctype html><title>${name} (test-bed stand-in)</title>" > /tmp/www/index.html
echo OK > /tmp/www/healthcheck
echo '{"status":"ok"}' > /tmp/www/healthz
${supervise(`httpd -f -p ${port} -h /tmp/www`)}`);

const nginx = script(`
# nginx's place: busybox httpd serving the root of /etc/nginx/nginx.conf on its listen port.
conf=/etc/nginx/nginx.conf
port=$(sed -n 's/.*listen \\([0-9]*\\);.*/\\1/p' "$conf" | head -n 1)
root=$(sed -n 's/.*root \\([^;]*\\);.*/\\1/p' "$conf" | head -n 1)
echo "stand-in nginx (test bed): serving \${root:-/usr/share/nginx/html} on :\${port:-80}"
${supervise('httpd -f -p "${port:-80}" -h "${root:-/usr/share/nginx/html}"')}`);

const redisServer = script(`
echo "stand-in redis (test bed): $*; keys in /data"
mkdir -p /data
${supervise('nc -ll -p 6379 -e /standin/redis-connection')}`);

/** One client connection: inline commands PING, SET k v, GET k, DEL k, QUIT; a key is the file /data/<k>. */
const redisConnection = script(`
set -f
while IFS= read -r line; do
  set -- $(printf '%s' "$line" | tr -d '\\r')
  key=$(printf '%s' "$2" | tr -cd 'A-Za-z0-9_.-')
  case "$(printf '%s' "$1" | tr a-z A-Z)" in
    PING) printf '+PONG\\r\\n' ;;
    SET) printf '%s' "$3" > "/data/$key" && printf '+OK\\r\\n' ;;
    GET) if [ -f "/data/$key" ]; then v=$(cat "/data/$key"); printf '$%s\\r\\n%s\\r\\n' "\${#v}" "$v"; else printf '$-1\\r\\n'; fi ;;
    DEL) if rm "/data/$key" 2>/dev/null; then printf ':1\\r\\n'; else printf ':0\\r\\n'; fi ;;
    QUIT) printf '+OK\\r\\n'; exit 0 ;;
    *) printf '%s\\r\\n' '-ERR unknown command (test-bed stand-in)' ;;
  esac
done`);

const n8n = script(`
if [ "$1" = worker ]; then
  echo "stand-in n8n worker (test bed): $*"
  ${supervise('sleep 2147483647')}
  exit 0
fi
exec /standin/page "$@"`);

const miniflux = script(`
if [ "$1" = -migrate ]; then
  echo "stand-in miniflux (test bed): migrations applied (DATABASE_URL \${DATABASE_URL:+set})"
  exit 0
fi
exec /standin/page "$@"`);

/** Every image reference the five built-in definitions use, each with its stand-in. */
export const standInImages: ReadonlyArray<BusyboxImageSpec> = [
  {
    name: 'docker.io/library/nginx:1.27.3-alpine',
    files: {
      '/standin/nginx': nginx,
      '/usr/share/nginx/html/.keep': { content: '' },
      '/etc/nginx/.keep': { content: '' },
    },
    config: { Entrypoint: ['/standin/nginx'] },
  },
  {
    name: 'docker.io/library/redis:7.4.1-alpine',
    files: { '/standin/redis-server': redisServer, '/standin/redis-connection': redisConnection },
    config: { Entrypoint: ['/standin/redis-server'] },
  },
  {
    name: 'docker.io/n8nio/n8n:1.72.1',
    files: { '/standin/n8n': n8n, '/standin/page': servePage('n8n', 5678) },
    config: { Entrypoint: ['/standin/n8n'] },
  },
  {
    name: 'docker.io/miniflux/miniflux:2.2.4',
    files: { '/standin/miniflux': miniflux, '/standin/page': servePage('miniflux', 8080) },
    config: { Entrypoint: ['/standin/miniflux'] },
  },
  {
    name: 'docker.io/louislam/uptime-kuma:1.23.16',
    files: { '/standin/uptime-kuma': servePage('uptime-kuma', 3001), '/app/.keep': { content: '' } },
    config: { Entrypoint: ['/standin/uptime-kuma'] },
  },
  // The real busybox image has no entrypoint and runs its args (the init container's `mkdir -p /app/data`).
  { name: 'docker.io/library/busybox:1.37.0', config: { Cmd: ['sh'] } },
];

/** The image references in a definition's templates and hooks (every `image:` value, containers and init ones). */
export const imagesOf = (spec: unknown): string[] => {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) {
        if (k === 'image' && typeof x === 'string') out.push(x);
        else walk(x);
      }
  };
  walk(spec);
  return out;
};
