import { describe, expect, it } from 'vitest';
import { type Failure } from './instance.js';
import {
  deletionDecision,
  type ObservationErrorKind,
  firstInstanceReference,
  isDns1123Label,
  managementResult,
  observationFailure,
} from './instance-reasons.js';

describe('Instance reason table (spec §3.5)', () => {
  it.each<[Failure, string, string]>([
    ['NoFailure', 'ManagementReady', '当前管理能力检查通过；具体资源授权和扩展安装仍需执行时验证'],
    [
      'InsufficientPrivileges',
      'InsufficientPrivileges',
      '原生管理要求非 superuser 且具备 CREATEDB/CREATEROLE；不会自动修改账号权限',
    ],
    ['DependencyUnavailable', 'DependencyUnavailable', '当前 PostgreSQL 不可写或所需管理能力暂不可用'],
    ['AuthenticationFailed', 'AuthenticationFailed', '当前管理能力检查未通过认证'],
    ['ObservationIncomplete', 'ObservationIncomplete', '管理能力检查尚有缺项，不能仅凭 metadata 查询成功标记 Ready'],
  ])('AY-37/AY-40/AY-41: failure %s → %s', (failure, reason, message) => {
    expect(managementResult(failure)).toEqual({ reason, message });
  });

  it('ManagementReady iff no failure', () => {
    const all: ReadonlyArray<Failure> = [
      'NoFailure',
      'ObservationIncomplete',
      'DependencyUnavailable',
      'AuthenticationFailed',
      'InsufficientPrivileges',
    ];
    for (const f of all) expect(managementResult(f).reason === 'ManagementReady').toBe(f === 'NoFailure');
  });

  it.each<[string, ObservationErrorKind, string, string]>([
    ['AY-39', 'Authentication', 'AuthenticationFailed', '管理连接认证或 TLS 校验失败；检查管理 Secret 和 CA/证书配置'],
    ['AY-44', 'CredentialsInvalid', 'InvalidCredentials', '管理 Secret 的用户名或密码字段缺失；检查引用字段映射'],
    ['AY-46', 'CredentialsChanged', 'CredentialsChanged', '观察期间管理凭据变化，已丢弃结果并关闭旧连接；等待重新验证'],
    [
      'AY-43/AY-47',
      'CredentialsUnavailable',
      'DependencyUnavailable',
      '无法读取管理 Secret；检查其是否存在及 controller namespace 内的读取权限',
    ],
    [
      'AY-49',
      'Other',
      'DependencyUnavailable',
      '管理连接或能力查询失败；检查 PostgreSQL 可达性、catalog 读取权限和超时',
    ],
  ])('%s (rule): observation error %s → %s with a fixed message', (_ids, kind, reason, message) => {
    expect(observationFailure(kind)).toEqual({ reason, message });
  });
});

describe('Instance deletion protection', () => {
  const databases = [
    { name: 'other-db', instanceRef: 'other' },
    { name: 'released-db', instanceRef: 'shared' },
  ];
  const tenants = [
    { namespace: 'apps', name: 'claim', provisionInstance: undefined },
    { namespace: 'apps', name: 'dynamic', provisionInstance: 'shared' },
  ];
  it('AY-50 (rule): a Database in any phase, then a provision Tenant, by name', () => {
    expect(firstInstanceReference('shared', databases, tenants)).toBe('Database/released-db');
    expect(firstInstanceReference('shared', databases.slice(0, 1), tenants)).toBe('Tenant/apps/dynamic');
    expect(firstInstanceReference('shared', [], tenants.slice(0, 1))).toBeUndefined();
  });
  it('AY-50 (rule): a reference → InstanceInUse with the reference in the message, finalizer kept', () => {
    expect(deletionDecision({ _tag: 'Listed', reference: 'Database/released-db' })).toEqual({
      reason: 'InstanceInUse',
      message: '仍被 Database/released-db 引用；先处理该资源，不会级联删除外部数据库',
      removeProtection: false,
    });
    expect(deletionDecision({ _tag: 'Listed', reference: 'Tenant/apps/dynamic' }).message).toBe(
      '仍被 Tenant/apps/dynamic 引用；先处理该资源，不会级联删除外部数据库',
    );
  });
  it('AY-51 (rule): a failed list → DependencyUnavailable and the finalizer kept', () => {
    expect(deletionDecision({ _tag: 'ListFailed' })).toEqual({
      reason: 'DependencyUnavailable',
      message: '无法确认 Database/Tenant 引用已解除；保留 Instance 删除保护并重试',
      removeProtection: false,
    });
  });
  it('AY-52 (rule): no reference → reason Deleting and the finalizer removed', () => {
    expect(deletionDecision({ _tag: 'Listed', reference: undefined })).toEqual({
      reason: 'Deleting',
      message: '引用已解除，仅移除登记保护；不删除 PostgreSQL 或凭据',
      removeProtection: true,
    });
  });
});

describe('management Secret namespace', () => {
  it('AY-53 (rule): only a DNS-1123 label is a valid controller namespace', () => {
    for (const ok of ['ayatori-system', 'a', 'x1']) expect(isDns1123Label(ok)).toBe(true);
    for (const bad of ['', 'Ayatori', 'a.b', '-a', 'a-', 'a'.repeat(64)]) expect(isDns1123Label(bad)).toBe(false);
  });
});
