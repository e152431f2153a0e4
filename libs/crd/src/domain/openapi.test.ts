import { Either, Schema } from 'effect';
import { describe, expect, it } from 'vitest';
import type { JSONSchemaProps } from '../api/manifest.js';
import { cel, crd, describe as doc, format, listMap, preserveUnknownFields, withDefault } from './annotations.js';
import { checkStructural, openApiSchema } from './openapi.js';
import { DateTimeString, Int32, Int64 } from './resource.js';

const ok = <A, I, R>(s: Schema.Schema<A, I, R>): JSONSchemaProps => Either.getOrThrowWith(openApiSchema(s), (e) => e);
const err = <A, I, R>(s: Schema.Schema<A, I, R>) => {
  const r = openApiSchema(s);
  if (Either.isRight(r)) throw new Error(`expected an error, got ${JSON.stringify(r.right)}`);
  return r.left;
};

describe('openApiSchema: scalars and filters', () => {
  it('maps keywords to OpenAPI types', () => {
    expect(ok(Schema.String)).toEqual({ type: 'string' });
    expect(ok(Schema.Number)).toEqual({ type: 'number' });
    expect(ok(Schema.Boolean)).toEqual({ type: 'boolean' });
    expect(ok(Schema.Int)).toEqual({ type: 'integer' });
  });

  it('carries string, number and array constraints from Effect filters', () => {
    expect(ok(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(5), Schema.pattern(/^[a-z]+$/)))).toEqual({
      type: 'string',
      minLength: 1,
      maxLength: 5,
      pattern: '^[a-z]+$',
    });
    expect(ok(Schema.Int.pipe(Schema.between(1, 9)))).toEqual({ type: 'integer', minimum: 1, maximum: 9 });
    expect(ok(Schema.Number.pipe(Schema.greaterThan(0)))).toEqual({
      type: 'number',
      minimum: 0,
      exclusiveMinimum: true,
    });
    expect(ok(Schema.Array(Schema.String).pipe(Schema.minItems(1), Schema.maxItems(3)))).toEqual({
      type: 'array',
      items: { type: 'string' },
      minItems: 1,
      maxItems: 3,
    });
  });

  it('keeps the tightest of repeated bounds', () => {
    expect(
      ok(Schema.String.pipe(Schema.maxLength(10), Schema.maxLength(4), Schema.minLength(1), Schema.minLength(2))),
    ).toEqual({
      type: 'string',
      maxLength: 4,
      minLength: 2,
    });
  });

  it('formats: int32, int64, date-time', () => {
    expect(ok(Int32)).toEqual({ type: 'integer', format: 'int32' });
    expect(ok(Int64)).toEqual({ type: 'integer', format: 'int64' });
    expect(ok(DateTimeString)).toEqual({ type: 'string', format: 'date-time' });
  });

  it('literal unions and Enums become enums; null makes the field nullable', () => {
    expect(ok(Schema.Literal('a', 'b'))).toEqual({ type: 'string', enum: ['a', 'b'] });
    enum Color {
      Red = 'red',
      Blue = 'blue',
    }
    expect(ok(Schema.Enums(Color))).toEqual({ type: 'string', enum: ['red', 'blue'] });
    expect(ok(Schema.NullOr(Schema.String))).toEqual({ type: 'string', nullable: true });
    expect(ok(Schema.Union(Schema.Literal(1, 2), Schema.Literal(3)))).toEqual({ type: 'integer', enum: [1, 2, 3] });
  });

  it('string | integer is x-kubernetes-int-or-string', () => {
    expect(ok(Schema.Union(Schema.String, Schema.Int))).toEqual({ 'x-kubernetes-int-or-string': true });
  });

  it('uses the encoded side of transformations (the wire shape)', () => {
    expect(ok(Schema.NumberFromString)).toEqual({ type: 'string' });
  });
});

describe('openApiSchema: objects, maps, unknown', () => {
  it('required = the non-optional properties, sorted', () => {
    expect(ok(Schema.Struct({ b: Schema.String, a: Schema.optional(Schema.Number), c: Schema.Boolean }))).toEqual({
      type: 'object',
      properties: { b: { type: 'string' }, a: { type: 'number' }, c: { type: 'boolean' } },
      required: ['b', 'c'],
    });
  });

  it('an empty struct is a bare object (unknown fields are pruned by the server)', () => {
    expect(ok(Schema.Struct({}))).toEqual({ type: 'object' });
  });

  it('records become additionalProperties; records of unknown and Unknown keep unknown fields', () => {
    expect(ok(Schema.Record({ key: Schema.String, value: Schema.String }))).toEqual({
      type: 'object',
      additionalProperties: { type: 'string' },
    });
    expect(ok(Schema.Record({ key: Schema.String, value: Schema.Unknown }))).toEqual({
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
    });
    expect(ok(Schema.Struct({ config: Schema.Unknown }))).toEqual({
      type: 'object',
      properties: { config: { 'x-kubernetes-preserve-unknown-fields': true } },
      required: ['config'],
    });
  });

  it('annotations: description, default, format, preserve-unknown-fields, list-map', () => {
    const Item = Schema.Struct({ name: Schema.String, value: Schema.optional(Schema.String) });
    const s = Schema.Struct({
      mode: Schema.optional(Schema.Literal('x', 'y').pipe(withDefault('x'), doc('the mode'))),
      size: Schema.optional(Schema.String.pipe(format('quantity'))),
      extra: Schema.optional(Schema.Struct({ known: Schema.optional(Schema.String) }).pipe(preserveUnknownFields)),
      items: Schema.optional(Schema.Array(Item).pipe(listMap('name'))),
    });
    expect(ok(s).properties).toEqual({
      mode: { type: 'string', enum: ['x', 'y'], default: 'x', description: 'the mode' },
      size: { type: 'string', format: 'quantity' },
      extra: {
        type: 'object',
        properties: { known: { type: 'string' } },
        'x-kubernetes-preserve-unknown-fields': true,
      },
      items: {
        type: 'array',
        items: {
          type: 'object',
          properties: { name: { type: 'string' }, value: { type: 'string' } },
          required: ['name'],
        },
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
      },
    });
  });

  it('optionalWith(…, { default }) becomes the CRD default, in wire form; the key stays optional', () => {
    const s = Schema.Struct({
      policy: Schema.optionalWith(Schema.Literal('Retain', 'Delete'), { default: () => 'Retain' as const }),
      port: Schema.optionalWith(Schema.NumberFromString, { default: () => 5432 }),
      name: Schema.String,
    });
    expect(ok(s)).toEqual({
      type: 'object',
      properties: {
        policy: { type: 'string', enum: ['Retain', 'Delete'], default: 'Retain' },
        port: { type: 'string', default: '5432' },
        name: { type: 'string' },
      },
      required: ['name'],
    });
  });

  it("Effect's own default annotation is honoured, and Effect's automatic descriptions are not copied", () => {
    expect(ok(Schema.String.pipe(Schema.minLength(1)).annotations({ default: 'a' }))).toEqual({
      type: 'string',
      minLength: 1,
      default: 'a',
    });
  });
});

describe('openApiSchema: CEL rules', () => {
  it('appends rules in order, inner first, with exact messages and options', () => {
    const s = Schema.Struct({ a: Schema.optional(Schema.String), b: Schema.optional(Schema.String) }).pipe(
      cel('has(self.a) != has(self.b)', 'exactly one of a and b'),
      cel('!has(self.a) || self.a != "x"', 'a must not be x', { reason: 'FieldValueForbidden', fieldPath: '.a' }),
    );
    expect(ok(s)['x-kubernetes-validations']).toEqual([
      { rule: 'has(self.a) != has(self.b)', message: 'exactly one of a and b' },
      {
        rule: '!has(self.a) || self.a != "x"',
        message: 'a must not be x',
        reason: 'FieldValueForbidden',
        fieldPath: '.a',
      },
    ]);
  });

  it('a rule on an optional field stays on that field', () => {
    const s = Schema.Struct({
      ip: Schema.optional(Schema.String.pipe(Schema.maxLength(45), cel('isIP(self)', 'not an IP'))),
    });
    expect(ok(s).properties?.['ip']).toEqual({
      type: 'string',
      maxLength: 45,
      'x-kubernetes-validations': [{ rule: 'isIP(self)', message: 'not an IP' }],
    });
  });

  it('a custom filter needs a CEL counterpart or an explicit serverUnchecked', () => {
    const even = Schema.Int.pipe(Schema.filter((n) => n % 2 === 0));
    expect(err(even).reason).toMatch(/filter without an OpenAPI counterpart/);
    expect(ok(even.pipe(cel('self % 2 == 0', 'must be even')))).toEqual({
      type: 'integer',
      'x-kubernetes-validations': [{ rule: 'self % 2 == 0', message: 'must be even' }],
    });
    expect(ok(even.pipe(crd({ serverUnchecked: true })))).toEqual({ type: 'integer' });
  });

  it('rejects malformed rules: empty message, line break in message', () => {
    expect(err(Schema.String.pipe(cel('self != ""', ''))).reason).toMatch(/empty message/);
    expect(err(Schema.String.pipe(cel('self != ""', 'two\nlines'))).reason).toMatch(/line break/);
  });
});

describe('openApiSchema: what a structural schema cannot say is a typed error naming the field', () => {
  it('union of objects', () => {
    const e = err(
      Schema.Struct({ x: Schema.Union(Schema.Struct({ a: Schema.String }), Schema.Struct({ b: Schema.String })) }),
    );
    expect(e._tag).toBe('CrdSchemaError');
    expect(e.path).toBe('.x');
    expect(e.reason).toMatch(/union/);
  });
  it('tuples', () => {
    expect(err(Schema.Struct({ t: Schema.Tuple(Schema.String, Schema.Number) })).path).toBe('.t');
  });
  it('recursion', () => {
    interface Tree {
      readonly children: ReadonlyArray<Tree>;
    }
    const Tree: Schema.Schema<Tree> = Schema.Struct({ children: Schema.Array(Schema.suspend(() => Tree)) });
    expect(err(Tree).reason).toMatch(/recursive/);
  });
  it('declarations without a wire form', () => {
    expect(err(Schema.Struct({ d: Schema.DateFromSelf })).path).toBe('.d');
  });
  it('list-map keys that are neither required nor defaulted', () => {
    const Item = Schema.Struct({ name: Schema.optional(Schema.String) });
    expect(err(Schema.Array(Item).pipe(listMap('name'))).reason).toMatch(/must be required or defaulted/);
  });
  it('mixed-type enums', () => {
    expect(err(Schema.Literal('a', 1)).reason).toMatch(/mixes/);
  });
});

describe('checkStructural', () => {
  it('accepts typed trees and reports untyped nodes', () => {
    expect(checkStructural({ type: 'object', properties: { a: { type: 'string' } } })).toEqual([]);
    expect(checkStructural({ type: 'object', properties: { a: {} } })).toEqual([
      {
        path: '.a',
        reason: 'no type (and neither x-kubernetes-int-or-string nor x-kubernetes-preserve-unknown-fields)',
      },
    ]);
  });
  it('reports properties together with additionalProperties, and set lists of objects', () => {
    expect(
      checkStructural({
        type: 'object',
        properties: { a: { type: 'string' } },
        additionalProperties: { type: 'string' },
      }).map((p) => p.reason),
    ).toEqual(['properties and additionalProperties are mutually exclusive']);
    expect(
      checkStructural({ type: 'array', items: { type: 'object' }, 'x-kubernetes-list-type': 'set' }).map(
        (p) => p.reason,
      ),
    ).toEqual(['x-kubernetes-list-type set needs scalar items']);
  });
});
