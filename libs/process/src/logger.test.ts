// The one log line format and its redaction rule, through Effect's logger as the apps install it.
import { Cause, Effect, Logger } from 'effect';
import { describe, expect, it } from 'vitest';
import { JsonLoggerLive, isSecretName, jsonLogger, logFnOf, redactText, REDACTED } from './logger.js';

const SECRET = 'hunter2-Zq9';

/** Runs `effect` with the JSON logger of app `t`; the parsed lines and the raw text. */
const logged = (effect: Effect.Effect<void>) => {
  const lines: string[] = [];
  Effect.runSync(effect.pipe(Effect.provide(JsonLoggerLive({ app: 't', write: (l) => lines.push(l) }))));
  return { raw: lines.join('\n'), records: lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
};

describe('the JSON log line', () => {
  it('is one object a line: time, level, app, message, annotations', () => {
    const { records } = logged(
      Effect.logWarning('round failed').pipe(Effect.annotateLogs({ controller: 'binding', attempt: 3n })),
    );
    expect(records).toHaveLength(1);
    const r = records[0] as Record<string, unknown>;
    expect(Object.keys(r)).toEqual(['time', 'level', 'app', 'message', 'annotations']);
    expect(Object.keys(r['annotations'] as object)).toEqual(['attempt', 'controller']); // by name: one line per call
    expect(new Date(r['time'] as string).toISOString()).toBe(r['time']);
    expect(r).toMatchObject({
      level: 'WARN',
      app: 't',
      message: 'round failed',
      annotations: { controller: 'binding', attempt: '3' },
    });
  });

  it('carries the cause of a failure, and nothing below the minimum level', () => {
    const { records } = logged(
      Effect.logDebug('not shown').pipe(
        Effect.zipRight(Effect.logError('boom', new Error('the reason'))),
        Effect.zipRight(Effect.logError('failed', Cause.fail('the typed error'))),
      ),
    );
    expect(records.map((r) => r['message'])).toEqual(['boom the reason', 'failed']);
    expect(records[1]?.['cause']).toContain('the typed error');
  });

  it('the direct form (callbacks outside a fiber) writes the same line', () => {
    const lines: string[] = [];
    logFnOf(jsonLogger({ app: 'nsd', write: (l) => lines.push(l) }))('listening', { port: 7400 });
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      level: 'INFO',
      app: 'nsd',
      message: 'listening',
      annotations: { port: 7400 },
    });
  });
});

describe('secrets are redacted by the logger', () => {
  it('annotations named for a secret lose their value, at any depth; public keys and ordinary names stay', () => {
    const { raw, records } = logged(
      Effect.logInfo('connecting').pipe(
        Effect.annotateLogs({
          password: SECRET,
          adminToken: SECRET,
          client_secret: SECRET,
          DB_DSN: SECRET,
          key: SECRET,
          nested: { privateKey: SECRET, host: 'db.internal' },
          nsd_public_key: 'ab12',
          tokenizer: 'keep',
        }),
      ),
    );
    expect(raw).not.toContain(SECRET);
    expect(records[0]?.['annotations']).toEqual({
      password: REDACTED,
      adminToken: REDACTED,
      client_secret: REDACTED,
      DB_DSN: REDACTED,
      key: REDACTED,
      nested: { privateKey: REDACTED, host: 'db.internal' },
      nsd_public_key: 'ab12',
      tokenizer: 'keep',
    });
  });

  it('a DSN with a password loses the password wherever it appears: annotation values, messages, causes', () => {
    const dsn = `postgres://app:${SECRET}@db.internal:5432/app?sslmode=require`;
    const { raw, records } = logged(
      Effect.logError(`cannot reach ${dsn}`, Cause.die(new Error(`connect ${dsn} refused`))).pipe(
        Effect.annotateLogs({ target: dsn, libpq: `host=db password=${SECRET} user=app` }),
      ),
    );
    expect(raw).not.toContain(SECRET);
    const r = records[0] as Record<string, unknown>;
    expect(r['message']).toContain(`postgres://app:${REDACTED}@db.internal:5432/app`);
    expect(r['cause']).toContain(`connect postgres://app:${REDACTED}@db.internal`);
    expect(r['annotations']).toEqual({
      target: `postgres://app:${REDACTED}@db.internal:5432/app?sslmode=require`,
      libpq: `host=db password=${REDACTED} user=app`,
    });
  });

  it('the rule itself: names and text', () => {
    expect(['apiKey', 'x-api-key', 'sessionCookie', 'Authorization', 'credentials'].filter(isSecretName)).toHaveLength(
      5,
    );
    expect(['keyspace', 'monkey', 'tokens_used', 'publicKey', 'host'].filter(isSecretName)).toEqual([]);
    expect(redactText('http://example.org/a:b@c')).toBe('http://example.org/a:b@c'); // no user:password before @
  });

  it('the default Effect logger would have leaked it (the rule is the logger, not the call site)', () => {
    const lines: string[] = [];
    const plain = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ annotations }) => lines.push(JSON.stringify([...annotations]))),
    );
    Effect.runSync(Effect.logInfo('x').pipe(Effect.annotateLogs({ password: SECRET }), Effect.provide(plain)));
    expect(lines.join()).toContain(SECRET);
  });
});
