// /api/v1/openapi.json, generated from the same Schemas the handlers decode and answer with (decision 0096).
import { JSONSchema, type Schema } from 'effect';
import {
  Accepted,
  ActionAccepted,
  ActionRequest,
  type ADOPTION_ACTIONS,
  type APPLICATION_ACTIONS,
  ApplyAccepted,
  DesiredSet,
  DiscoveryList,
  ListPage,
  PlanResult,
  Projection,
  WireObject,
} from '../../api/http/bodies.js';
import { ERROR_CODES, ErrorEnvelope } from '../../api/http/errors.js';
import { PageList, SettingList, SettingPut, SettingWritten } from '../../api/http/extension-bodies.js';
import { KERNEL_KINDS } from '../../api/group.js';

const schemas: Record<string, Schema.Schema.Any> = {
  WireObject,
  Projection,
  ListPage,
  Accepted,
  DesiredSet,
  PlanResult,
  ApplyAccepted,
  ActionRequest,
  ActionAccepted,
  DiscoveryList,
  ErrorEnvelope,
  PageList,
  SettingList,
  SettingPut,
  SettingWritten,
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const body = (name: string) => ({ content: { 'application/json': { schema: ref(name) } } });
const errors = Object.fromEntries(
  [...new Set(Object.values(ERROR_CODES).map((c) => c.status))].sort().map((status) => [
    String(status),
    {
      description: Object.entries(ERROR_CODES)
        .filter(([, c]) => c.status === status)
        .map(([code]) => code)
        .join(', '),
      ...body('ErrorEnvelope'),
    },
  ]),
);
const param = (
  name: string,
  where: 'path' | 'query' | 'header',
  description: string,
  required = where === 'path',
  values?: ReadonlyArray<string>,
) => ({
  name,
  in: where,
  required,
  description,
  schema: { type: 'string', ...(values ? { enum: values } : {}) },
});
const kind = param(
  'kind',
  'path',
  'A kernel kind (name or plural); extension kinds with apiVersion',
  true,
  KERNEL_KINDS,
);
const namespace = param('namespace', 'query', 'Namespace (namespaced kinds)');

/**
 * What each action of POST /api/v1/action-requests does (hand-written: a Record over the action lists, so adding an
 * action without its text does not compile). Application actions: decisions 0224, 0227; seed 000 §5.4–§5.6.
 */
export const ACTION_TEXT: Readonly<
  Record<(typeof ADOPTION_ACTIONS)[number] | (typeof APPLICATION_ACTIONS)[number], string>
> = {
  adopt: 'take an unmanaged object under KOS management; an immutable pre-adoption snapshot is written first (record)',
  release: 'give up management of an adopted object, leaving it in the cluster',
  decline: 'mark a discovered object as not to be adopted',
  stop: 'Application: writes only spec.paused=true; scalable workloads go to 0 replicas, Volumes/PVCs/Services/Endpoints stay, phase keeps Ready (Endpoint Serving=False ApplicationPaused)',
  start: 'Application: writes spec.paused=false; replicas return to spec.replicas, else the package value',
  scale:
    'Application: writes spec.replicas (body: replicas, a non-negative integer), accepted while stopped; start converges to the last value',
  resources:
    'Application: writes only the submitted requests/limits (body: resources); a limit below its request is invalid_field naming the field',
  restart:
    'Application (Ready/Upgrading): a one-shot record (record); the reconciler deletes and recreates the workloads once, writes no spec',
  retry:
    'Application (Failed): a one-shot record (record); the retry budget (5 tries, 10 s to 5 min) is reset and the app returns to Installing. Also accepted when status.upgrade is RolledBack: the held target is preflighted again',
  orphan:
    'Application (Uninstalling, blocked for 10 min with a non-empty block list): a one-shot record (record); the blockers are abandoned, an immutable app-orphan manifest is written in kos-system and the uninstall gate opens',
  confirm:
    'Application whose upgrade was declared irreversible, else action_rejected; body digest = the requested target digest (status-upgrade renderDigest), else invalid_field naming digest: a one-shot record (record) carrying the target and spec digests; the reconciler accepts it only when its target digest equals the observation of the cluster, the digest the current spec requests, and its spec digest the current one — then the target becomes the baseline',
};

let cached: unknown;

export const openApiDocument = (): unknown =>
  (cached ??= {
    openapi: '3.1.0',
    info: {
      title: 'KOS control plane',
      version: 'v1',
      description: `Every failure is {"error": {...}}; codes and their statuses: ${Object.entries(ERROR_CODES)
        .map(([c, v]) => `${c} ${v.status}`)
        .join(
          ', ',
        )}. Requests must name this server in Host (else 421) and come from no other Origin (else 403); no CORS is granted; writes need Content-Type: application/json (else 415). An Application's spec.config values read back as "(set)"; "(set)" written back keeps the stored value.`,
    },
    paths: {
      '/api/v1/resources/{kind}': {
        get: {
          summary: 'One page of projections',
          parameters: [
            kind,
            namespace,
            param('limit', 'query', 'Page size'),
            param('continue', 'query', 'Token of the previous page (same kind, namespace and labelSelector)'),
            param('labelSelector', 'query', 'Kubernetes label selector'),
            param('apiVersion', 'query', 'Extension kinds only'),
          ],
          responses: { '200': { description: 'A page', ...body('ListPage') }, ...errors },
        },
        post: {
          summary: 'Create (idempotent)',
          parameters: [kind, namespace],
          requestBody: body('WireObject'),
          responses: { '202': { description: 'Accepted', ...body('Accepted') }, ...errors },
        },
      },
      '/api/v1/resources/{kind}/{name}': {
        get: {
          summary: 'One projection (ETag = resourceVersion)',
          parameters: [kind, param('name', 'path', 'Object name'), namespace],
          responses: { '200': { description: 'The projection', ...body('Projection') }, ...errors },
        },
        put: {
          summary: 'Update client-owned fields',
          parameters: [
            kind,
            param('name', 'path', 'Object name'),
            namespace,
            param('If-Match', 'header', 'The resourceVersion read (or metadata.resourceVersion)'),
          ],
          requestBody: body('WireObject'),
          responses: { '202': { description: 'Accepted', ...body('Accepted') }, ...errors },
        },
        delete: {
          summary: 'Delete',
          parameters: [
            kind,
            param('name', 'path', 'Object name'),
            namespace,
            param('If-Match', 'header', 'The resourceVersion read', true),
          ],
          responses: { '202': { description: 'Accepted', ...body('Accepted') }, ...errors },
        },
      },
      '/api/v1/plan-requests': {
        post: {
          summary: 'Plan a desired set; writes nothing. The answer carries the digest an apply binds to (planDigest)',
          requestBody: body('DesiredSet'),
          responses: { '200': { description: 'The plan', ...body('PlanResult') }, ...errors },
        },
      },
      '/api/v1/apply-requests': {
        post: {
          summary:
            'Apply a desired set (executes after 202) only with the planDigest of a reviewed plan, and only if the plan computed now has that digest (none: 428 precondition_required; another: 409 conflict; both with current = the current plan)',
          requestBody: body('DesiredSet'),
          responses: { '202': { description: 'Accepted', ...body('ApplyAccepted') }, ...errors },
        },
      },
      '/api/v1/action-requests': {
        post: {
          summary: 'Run an action on one object: 202 with the object (and the record an action writes)',
          description: `${Object.entries(ACTION_TEXT)
            .map(([a, t]) => `${a}: ${t}.`)
            .join(
              ' ',
            )} Application actions are refused with action_rejected (409) when the phase does not allow them and on an app being uninstalled (except orphan); spec writes are bound to the stored resourceVersion, so two concurrent stops are serialized or one gets conflict (409, current). An unknown action is unsupported_action.`,
          requestBody: body('ActionRequest'),
          responses: { '202': { description: 'Accepted', ...body('ActionAccepted') }, ...errors },
        },
      },
      '/api/v1/pages': {
        get: {
          summary:
            'The pages of activated components this role sees, with their declared source and the actions the role may take',
          responses: { '200': { description: 'The pages', ...body('PageList') }, ...errors },
        },
      },
      '/api/v1/settings': {
        get: {
          summary:
            'The settings of activated components: current value, declared writer, source, modification entry or the reason there is none',
          parameters: [param('node', 'query', 'The node of node-scoped items')],
          responses: { '200': { description: 'The settings', ...body('SettingList') }, ...errors },
        },
      },
      '/api/v1/settings/{id}': {
        put: {
          summary:
            'Write one value: only a user-written, modifiable item of an activated component (else capability_missing / invalid_field); node items name their node, user items are the caller’s own',
          parameters: [param('id', 'path', 'Setting id')],
          requestBody: body('SettingPut'),
          responses: { '200': { description: 'Written', ...body('SettingWritten') }, ...errors },
        },
      },
      '/api/v1/discovery': {
        get: {
          summary: 'Discovered objects with their sources',
          responses: { '200': { description: 'The index', ...body('DiscoveryList') }, ...errors },
        },
      },
    },
    components: {
      schemas: Object.fromEntries(
        Object.entries(schemas).map(([name, s]) => [
          name,
          JSONSchema.make(s as Schema.Schema<unknown, unknown, never>, { target: 'openApi3.1' }),
        ]),
      ),
    },
  });
