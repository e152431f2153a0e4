// Configuration of the modules and the Ayatori flags: pure parsing of argv and env.
import { describe, expect, it } from 'vitest';
import { bindAddress, ConfigError, parseConfig } from './config.js';

describe('modules and Ayatori configuration', () => {
  it('runs both modules by default; --modules / CONTROLLER_MODULES select them, the flag winning', () => {
    expect([...parseConfig([], {}).modules]).toEqual(['kos', 'ayatori']);
    expect([...parseConfig(['--modules=kos'], {}).modules]).toEqual(['kos']);
    expect([...parseConfig(['--modules', 'ayatori'], { CONTROLLER_MODULES: 'kos' }).modules]).toEqual(['ayatori']);
    expect([...parseConfig([], { CONTROLLER_MODULES: ' ayatori , kos ' }).modules]).toEqual(['ayatori', 'kos']);
  });

  it('an unknown or empty module list is a configuration error naming the known modules', () => {
    expect(() => parseConfig(['--modules=kos,billing'], {})).toThrow(
      new ConfigError('unknown module "billing" (known: kos, ayatori)'),
    );
    expect(() => parseConfig(['--modules=,'], {})).toThrow(ConfigError);
  });

  it('seed flags: --database-secret-namespace defaults to $POD_NAMESPACE (empty without it), --database-root-cert to empty', () => {
    expect(parseConfig([], { POD_NAMESPACE: 'ayatori-system' }).databaseSecretNamespace).toBe('ayatori-system');
    expect(
      parseConfig(['--database-secret-namespace=ops'], { POD_NAMESPACE: 'ayatori-system' }).databaseSecretNamespace,
    ).toBe('ops');
    expect(parseConfig([], {}).databaseSecretNamespace).toBe('');
    expect(parseConfig([], {}).databaseRootCert).toBe('');
    expect(parseConfig(['--database-root-cert', '/etc/ca.pem'], {}).databaseRootCert).toBe('/etc/ca.pem');
  });

  it('--database-workers: one Ayatori round at a time by default; the flag or CONTROLLER_DATABASE_WORKERS sets 1..64, anything else refused', () => {
    expect(parseConfig([], {}).databaseWorkers).toBe(1);
    expect(parseConfig(['--database-workers=4'], {}).databaseWorkers).toBe(4);
    expect(parseConfig([], { CONTROLLER_DATABASE_WORKERS: '8' }).databaseWorkers).toBe(8);
    for (const bad of ['0', '65', 'many'])
      expect(() => parseConfig([`--database-workers=${bad}`], {})).toThrow(ConfigError);
  });

  it('leader election: off by default; --leader-elect alone or =true turns it on and needs a Lease namespace', () => {
    expect(parseConfig([], {}).leaderElection.enabled).toBe(false);
    const on = parseConfig(['--leader-elect', '--port', '0'], { POD_NAMESPACE: 'ayatori-system' });
    expect(on.leaderElection).toEqual({
      enabled: true,
      namespace: 'ayatori-system',
      id: 'ayatori-database.database.ayatori.ddupan.top',
    });
    expect(on.port).toBe(0);
    expect(
      parseConfig(['--leader-elect=false'], { CONTROLLER_LEADER_ELECT: 'true', POD_NAMESPACE: 'x' }).leaderElection
        .enabled,
    ).toBe(false);
    expect(() => parseConfig(['--leader-elect'], {})).toThrow(
      new ConfigError('--leader-elect needs --leader-election-namespace (or POD_NAMESPACE)'),
    );
    expect(() => parseConfig(['--leader-elect=yes'], {})).toThrow(ConfigError);
    // the KOS reconcilers are elected too (their own Lease), so the namespace is needed with --modules=kos as well
    expect(() => parseConfig(['--leader-elect', '--modules=kos'], {})).toThrow(ConfigError);
    expect(
      parseConfig(['--leader-elect', '--modules=kos', '--leader-election-namespace=kos-system'], {})
        .kosLeaderElectionId,
    ).toBe('kos-controller.kos.tsic.top');
  });

  it('--kos-crds: verify by default, install on request, anything else refused', () => {
    expect(parseConfig([], {}).kosCrds).toBe('verify');
    expect(parseConfig(['--kos-crds=install'], { KOS_CRDS: 'verify' }).kosCrds).toBe('install');
    expect(parseConfig([], { KOS_CRDS: 'install' }).kosCrds).toBe('install');
    expect(() => parseConfig(['--kos-crds=apply'], {})).toThrow(
      new ConfigError('--kos-crds must be install or verify, not "apply"'),
    );
    expect(parseConfig(['--kos-label-selector=a=b'], {}).kosLabelSelector).toBe('a=b');
  });

  it('--extension-rbac: managed by default, external on request, anything else refused (decision 0440)', () => {
    expect(parseConfig([], {}).extensionRbac).toBe('managed');
    expect(parseConfig(['--extension-rbac=external'], { KOS_EXTENSION_RBAC: 'managed' }).extensionRbac).toBe(
      'external',
    );
    expect(parseConfig([], { KOS_EXTENSION_RBAC: 'external' }).extensionRbac).toBe('external');
    expect(() => parseConfig(['--extension-rbac=none'], {})).toThrow(
      new ConfigError('--extension-rbac must be managed or external, not "none"'),
    );
  });

  it('issue 21: provisioning is on only with --openbao-address; the address, token file and paths are checked before start', () => {
    expect(parseConfig([], {}).openBao).toBeUndefined();
    expect(
      parseConfig(['--openbao-address=https://bao.example:8200', '--openbao-token-file=/run/bao/token'], {}).openBao,
    ).toEqual({
      address: 'https://bao.example:8200',
      tokenFile: '/run/bao/token',
      mount: 'secret',
      basePath: 'postgresql-tenants',
    });
    expect(() => parseConfig(['--openbao-address=https://user:pw@bao.example', '--openbao-token-file=/t'], {})).toThrow(
      ConfigError,
    );
    expect(() => parseConfig(['--openbao-address=https://bao.example'], {})).toThrow(
      new ConfigError('--openbao-address needs --openbao-token-file'),
    );
    expect(() =>
      parseConfig(
        ['--openbao-address=https://bao.example', '--openbao-token-file=/t', '--openbao-tenant-base-path=a/../b'],
        {},
      ),
    ).toThrow(ConfigError);
  });
});

describe('hole 5: beyond loopback only with the control-plane database, and then only with TLS or --insecure-http', () => {
  it('--identity is no flag any more and KOS_IDENTITY is refused, never a licence to bind beyond loopback', () => {
    for (const argv of [['--identity=local-accounts'], ['--identity', 'x']])
      expect(() => parseConfig(argv, {})).toThrow(/unknown flag --identity/);
    expect(() => parseConfig([], { KOS_IDENTITY: 'oidc' })).toThrow(/KOS_IDENTITY_DB/);
  });

  it('without --identity-db the bind address is loopback whatever the configuration object says', () => {
    const forged = { ...parseConfig([], {}), host: '0.0.0.0', insecureHttp: true };
    expect(bindAddress(forged).host).toBe('127.0.0.1');
    expect(bindAddress({ ...parseConfig([], {}), host: '::1' }).host).toBe('::1');
    expect(bindAddress({ ...parseConfig([], {}), host: 'localhost' }).host).toBe('127.0.0.1');
  });

  it('with --identity-db: loopback as asked; beyond loopback needs TLS or --insecure-http', () => {
    expect(bindAddress(parseConfig(['--identity-db', '/tmp/x.db'], {})).host).toBe('127.0.0.1');
    expect(() => parseConfig(['--identity-db=/tmp/x.db', '--host=0.0.0.0'], {})).toThrow(/beyond loopback/);
    const tls = parseConfig(['--identity-db=/tmp/x.db', '--host=0.0.0.0', '--tls-cert=c', '--tls-key=k'], {});
    expect(bindAddress(tls)).toEqual({ host: '0.0.0.0' });
    const clear = parseConfig(['--identity-db=/tmp/x.db', '--host=0.0.0.0', '--insecure-http'], {});
    expect(bindAddress(clear).host).toBe('0.0.0.0');
    expect(bindAddress(clear).notice).toMatch(/in clear/);
    expect(() => parseConfig(['--tls-cert=c'], {})).toThrow(/go together/);
    expect(() => parseConfig(['--export-dir=/tmp/e'], {})).toThrow(/--identity-db/);
    // A configuration object that skips parseConfig is still refused at bind time.
    expect(() => bindAddress({ ...parseConfig([], {}), identityDb: '/tmp/x.db', host: '0.0.0.0' })).toThrow(
      /beyond loopback/,
    );
  });
});
