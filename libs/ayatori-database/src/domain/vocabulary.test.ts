import { Duration } from 'effect';
import { describe, expect, it } from 'vitest';
import {
  BindingTargetIndex,
  ConditionType,
  Finalizers,
  StaleSnapshotMessage,
  TenantMessage,
  Timing,
} from './vocabulary.js';

describe('fixed vocabulary (seed §2.6, §3.5, §5)', () => {
  it('AY-13/AY-14/AY-36 (names): the three protection finalizers', () => {
    expect(Finalizers).toEqual({
      instance: 'database.ayatori.ddupan.top/instance-protection',
      database: 'database.ayatori.ddupan.top/database-protection',
      tenant: 'database.ayatori.ddupan.top/tenant-protection',
    });
    expect(ConditionType.Ready).toBe('Ready');
    expect(BindingTargetIndex).toBe('database.bindingTarget');
  });

  it('AY-35/AY-54/AY-49 (constants): 30 s recheck, 1 ms retry-soon, 15 s observation budget', () => {
    expect(Duration.toMillis(Timing.dependencyRetry)).toBe(30_000);
    expect(Duration.toMillis(Timing.retrySoon)).toBe(1);
    expect(Duration.toMillis(Timing.observationBudget)).toBe(15_000);
  });

  it('Tenant messages and stale-snapshot conflicts are the seed strings', () => {
    expect(TenantMessage.bindingPending).toBe('申请目标已固定，等待资源侧绑定');
    expect(TenantMessage.deletionPending).toBe('删除清理尚未接入；保留 finalizer 和 Database 绑定，未执行后端删除');
    expect(TenantMessage.bindingComplete).toBe('双向绑定已记录；尚未执行供应、应用登录验证或凭据交付，不能 Ready');
    expect(StaleSnapshotMessage).toEqual({
      binding: '绑定快照已过期，请重新读取后判断',
      instance: 'Instance 快照已过期，请重新观察',
    });
  });
});
