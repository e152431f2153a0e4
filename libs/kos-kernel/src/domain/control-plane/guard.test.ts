// The request guard's pure rules (issue 17, first section; decision 0200).
import { describe, expect, it } from 'vitest';
import { hostPolicyFor, hostProblem, isJsonContentType, originProblem, ownOrigins, parseHostHeader } from './guard.js';

describe('hole 1: writes require Content-Type: application/json (rule)', () => {
  it('application/json with or without parameters, any case, is JSON; nothing else is', () => {
    for (const ok of [
      'application/json',
      'application/json; charset=utf-8',
      'Application/JSON;charset=UTF-8',
      ' application/json ',
    ])
      expect(isJsonContentType(ok)).toBe(true);
    for (const no of [
      undefined,
      '',
      'text/plain',
      'text/plain;charset=UTF-8',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/jsonx',
      'application/json-seq',
      'text/json',
    ])
      expect(isJsonContentType(no)).toBe(false);
  });
});

describe('hole 2: DNS rebinding — the Host must name this server (rule)', () => {
  const loopback = hostPolicyFor({ configuredHost: '127.0.0.1', boundAddress: '127.0.0.1', port: 8080 });

  it('bound to loopback: the configured host and the loopback names, with the bound port', () => {
    expect([...loopback.names].sort()).toEqual(['127.0.0.1', '[::1]', 'localhost']);
    for (const ok of ['127.0.0.1:8080', 'localhost:8080', 'LocalHost:8080', '[::1]:8080'])
      expect(hostProblem(ok, loopback)).toBeUndefined();
    for (const no of [
      undefined,
      '',
      'evil.example',
      'evil.example:8080',
      'localhost.:8080',
      '127.0.0.1',
      '127.0.0.1:80',
      '127.0.0.1:8081',
      '127.0.0.2:8080',
      'localhost.evil.example:8080',
      '127.0.0.1:8080@evil.example',
      'user@127.0.0.1:8080',
    ])
      expect(hostProblem(no, loopback)).toMatch(/Host/);
  });

  it('a wildcard is never a name; a configured name is one; port 80 may be left out', () => {
    const wildcard = hostPolicyFor({ configuredHost: '0.0.0.0', boundAddress: '127.0.0.1', port: 80 });
    expect(wildcard.names).not.toContain('0.0.0.0');
    expect(hostProblem('127.0.0.1', wildcard)).toBeUndefined();
    expect(hostProblem('127.0.0.1:80', wildcard)).toBeUndefined();
    const named = hostPolicyFor({ configuredHost: 'kos.home.arpa', boundAddress: '192.168.1.5', port: 443 });
    expect([...named.names].sort()).toEqual(['192.168.1.5', 'kos.home.arpa']);
    expect(hostProblem('kos.home.arpa:443', named)).toBeUndefined();
    expect(hostProblem('localhost:443', named)).toMatch(/does not serve/);
    expect(hostPolicyFor({ configuredHost: '::1', boundAddress: '::1', port: 1 }).names).toContain('[::1]');
  });

  it('host headers parse as name and port', () => {
    expect(parseHostHeader('[::1]:9')).toEqual({ name: '[::1]', port: 9 });
    expect(parseHostHeader('Example.COM')).toEqual({ name: 'example.com', port: 80 });
    expect(parseHostHeader('a:99999')).toBeUndefined();
    expect(parseHostHeader('a b')).toBeUndefined();
  });
});

describe('hole 3: a present Origin must be the API’s own (rule)', () => {
  const policy = hostPolicyFor({ configuredHost: '127.0.0.1', boundAddress: '127.0.0.1', port: 8080 });

  it('own origins are http://<name>:<port> of the accepted names; no Origin is fine', () => {
    expect([...ownOrigins(policy)].sort()).toEqual([
      'http://127.0.0.1:8080',
      'http://[::1]:8080',
      'http://localhost:8080',
    ]);
    for (const ok of [undefined, 'http://127.0.0.1:8080', 'http://LOCALHOST:8080', 'http://[::1]:8080'])
      expect(originProblem(ok, undefined, policy)).toBeUndefined();
    expect(originProblem('http://127.0.0.1:8080', 'same-origin', policy)).toBeUndefined();
    expect(originProblem(undefined, 'none', policy)).toBeUndefined();
  });

  it('another scheme, host or port, null and garbage are refused; so is a cross-site or same-site fetch', () => {
    for (const no of [
      'http://evil.example',
      'null',
      'https://127.0.0.1:8080',
      'http://127.0.0.1:8081',
      'http://127.0.0.1',
      'http://localhost.evil.example:8080',
      'file://',
      'not a url',
    ])
      expect(originProblem(no, undefined, policy)).toMatch(/refused/);
    expect(originProblem(undefined, 'cross-site', policy)).toMatch(/cross-site/);
    expect(originProblem(undefined, 'same-site', policy)).toMatch(/same-site/);
  });
});
