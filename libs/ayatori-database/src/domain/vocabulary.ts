// Every fixed string and number of the Database module, in one place: finalizers, the condition type, phases,
// reasons and messages (verbatim from the seed, Chinese included), requeue intervals and the observation budget.
// Nothing here is computed; tests compare the tables with the seed's literals.
import { Duration } from 'effect';

export const GROUP = 'database.ayatori.ddupan.top';

/** Finalizers (seed §2.6). No product labels or annotations exist. */
export const Finalizers = {
  instance: `${GROUP}/instance-protection`,
  database: `${GROUP}/database-protection`,
  tenant: `${GROUP}/tenant-protection`,
} as const;

/** A Tenant annotation whose new value asks for one password rotation (issue 21; decision 0233). */
export const RotateAnnotation = `${GROUP}/rotate`;

/** The only condition type on all three kinds. */
export const ConditionType = { Ready: 'Ready' } as const;

/** The informer index of Tenants by the Database they target (`spec.databaseRef.name` or `tenant-<uid>`). */
export const BindingTargetIndex = 'database.bindingTarget';
/** Prefix of a dynamic Database's object name: `tenant-<Tenant UID>`. */
export const DynamicDatabasePrefix = 'tenant-';

/** Controller names (controller-runtime `Named(...)`). */
export const ControllerNames = {
  binding: 'database-binding',
  instance: 'database-instance',
  import: 'database-import',
} as const;

export const TenantPhase = { Binding: 'Binding', Bound: 'Bound', Deleting: 'Deleting' } as const;
export type TenantPhase = (typeof TenantPhase)[keyof typeof TenantPhase];

/** Database phase strings the rules understand (the field itself is free text). */
export const DatabasePhase = {
  Available: 'Available',
  Released: 'Released',
  Deleting: 'Deleting',
  Pending: 'Pending',
} as const;

export const InstancePhase = {
  Pending: 'Pending',
  Validating: 'Validating',
  Ready: 'Ready',
  Deleting: 'Deleting',
} as const;
export type InstancePhase = (typeof InstancePhase)[keyof typeof InstancePhase];

/** Database `spec.source` values the rules compare against. */
export const DatabaseSource = { Provision: 'Provision', Import: 'Import' } as const;

/** Tenant reasons (binding controller; the Tenant's Ready is always False in this slice). */
export const TenantReason = {
  BindingPending: 'BindingPending',
  InvalidRequest: 'InvalidRequest',
  DeletionPending: 'DeletionPending',
  DependencyUnavailable: 'DependencyUnavailable',
  Conflict: 'Conflict',
  BindingComplete: 'BindingComplete',
} as const;
export type TenantReason = (typeof TenantReason)[keyof typeof TenantReason];

/** Tenant messages, verbatim. */
export const TenantMessage = {
  bindingPending: '申请目标已固定，等待资源侧绑定',
  deletionPending: '删除清理尚未接入；保留 finalizer 和 Database 绑定，未执行后端删除',
  bindingComplete: '双向绑定已记录；尚未执行供应、应用登录验证或凭据交付，不能 Ready',
  // request resolution
  exactlyOneRequest: '必须且只能选择动态申请或已有 Database',
  invalidIdentifier: '动态 database/loginRole 必须符合 PostgreSQL identifier 规则；省略时使用 Tenant 名称',
  // DependencyUnavailable
  databaseMissing: '指定的 Database 尚不存在，等待资源出现',
  instanceMissing: '引用的 Instance 尚不存在',
  instanceNotReady: 'Instance 正在删除或尚无当前版本的 Ready 观察',
  databaseNotAvailable: 'Database 尚未完成验证并进入 Available，等待资源观察',
  databaseWithoutInstanceIdentity: 'Database 尚未完成实例身份验证',
  // Conflict
  dynamicNameTaken: '动态 Database 名称已存在，但目标或 Tenant UID 不匹配；请核实记录，未自动认领',
  instanceReplaced: 'Instance UID 已变化；请核实实例身份，未迁移或接管资源',
  databaseReleasedOrDeleting: 'Database 正在删除或处于 Released；请由管理员核实并处理，未重新分配',
  resourceSideChanged: '资源侧身份或绑定已变化，未完成申请侧绑定',
  databaseUidChanged: (database: string) =>
    `Database ${database} 的 UID 与已记录绑定不同；请核实同名重建，未接管新对象`,
  databaseBoundElsewhere: (database: string, namespace: string, name: string, uid: string) =>
    `Database ${database} 已绑定 Tenant ${namespace}/${name}（UID ${uid}）；未抢占`,
} as const;

/** Instance reasons (Instance controller). Ready is True only with ManagementReady. */
export const InstanceReason = {
  ManagementReady: 'ManagementReady',
  InsufficientPrivileges: 'InsufficientPrivileges',
  DependencyUnavailable: 'DependencyUnavailable',
  AuthenticationFailed: 'AuthenticationFailed',
  ObservationIncomplete: 'ObservationIncomplete',
  InvalidCredentials: 'InvalidCredentials',
  CredentialsChanged: 'CredentialsChanged',
  Deleting: 'Deleting',
  InstanceInUse: 'InstanceInUse',
} as const;
export type InstanceReason = (typeof InstanceReason)[keyof typeof InstanceReason];

/** Instance messages, verbatim. */
export const InstanceMessage = {
  managementReady: '当前管理能力检查通过；具体资源授权和扩展安装仍需执行时验证',
  insufficientPrivileges: '原生管理要求非 superuser 且具备 CREATEDB/CREATEROLE；不会自动修改账号权限',
  dependencyUnavailable: '当前 PostgreSQL 不可写或所需管理能力暂不可用',
  authenticationFailed: '当前管理能力检查未通过认证',
  observationIncomplete: '管理能力检查尚有缺项，不能仅凭 metadata 查询成功标记 Ready',
  connectionAuthenticationFailed: '管理连接认证或 TLS 校验失败；检查管理 Secret 和 CA/证书配置',
  invalidCredentials: '管理 Secret 的用户名或密码字段缺失；检查引用字段映射',
  credentialsChanged: '观察期间管理凭据变化，已丢弃结果并关闭旧连接；等待重新验证',
  credentialsUnavailable: '无法读取管理 Secret；检查其是否存在及 controller namespace 内的读取权限',
  observationFailed: '管理连接或能力查询失败；检查 PostgreSQL 可达性、catalog 读取权限和超时',
  deleting: '引用已解除，仅移除登记保护；不删除 PostgreSQL 或凭据',
  referencesUnknown: '无法确认 Database/Tenant 引用已解除；保留 Instance 删除保护并重试',
  instanceInUse: (reference: string) => `仍被 ${reference} 引用；先处理该资源，不会级联删除外部数据库`,
} as const;

/** Messages of the synthetic 409s the Kubernetes adapter returns when its snapshot is stale. */
export const StaleSnapshotMessage = {
  binding: '绑定快照已过期，请重新读取后判断',
  instance: 'Instance 快照已过期，请重新观察',
} as const;

/** Log lines when an event cannot be mapped to requests (the periodic recheck covers it). */
export const MappingFailureLog = {
  database: '无法映射 Database 事件；等待低频重试',
  instance: '无法映射 Instance 事件；等待低频重试',
  secret: '无法映射管理 Secret 事件；等待低频重试',
} as const;

/** Setup errors and logs of the manager wiring. */
export const SetupMessage = {
  instanceObserverRequired: 'instance observer and valid management Secret namespace required',
  instanceObservationFailed: 'Failed to set up Instance observation',
  bindingControllerFailed: 'Failed to set up Database binding controller',
} as const;

/** Timing (seed §5): the low-frequency recheck, the immediate retry, and the single-round I/O budget. */
export const Timing = {
  /** `dependencyRetry`: both controllers recheck after 30 s (watches are the main trigger). */
  dependencyRetry: Duration.seconds(30),
  /** `RetrySoon`: the Tenant changed generation during binding. */
  retrySoon: Duration.millis(1),
  /** One Instance reconcile (load, finalizer, reference lists, PostgreSQL observation) gets 15 s. */
  observationBudget: Duration.seconds(15),
} as const;
