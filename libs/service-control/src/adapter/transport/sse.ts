// SSE framing of config.stream (spec §3.1): event name `service.control.v1`, data = the complete signed envelope in
// URL-safe Base64 without padding. Pure string functions; the HTTP parts are in http.ts.
import { Either } from 'effect';
import { type ServiceControlError, scError } from '../../domain/errors.js';
import { API_NAME } from '../../api/message.js';

export const SSE_EVENT = API_NAME;

export const base64UrlEncode = (b: Uint8Array): string =>
  Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64url');

const B64URL = /^[A-Za-z0-9_-]*$/;

/** Strict decoding: URL-safe alphabet only, no padding, no whitespace, and the canonical (re-encodable) form. */
export const base64UrlDecodeStrict = (s: string): Either.Either<Uint8Array, ServiceControlError> => {
  if (!B64URL.test(s) || s.length % 4 === 1)
    return Either.left(scError('invalid-encoding', 'SSE data is not unpadded URL-safe Base64'));
  const bytes = Buffer.from(s, 'base64url');
  if (bytes.toString('base64url') !== s)
    return Either.left(scError('invalid-encoding', 'SSE data is not canonical Base64'));
  return Either.right(new Uint8Array(bytes));
};

/** One SSE event carrying a signed envelope. */
export const sseFrame = (envelope: Uint8Array): string => `event: ${SSE_EVENT}\ndata: ${base64UrlEncode(envelope)}\n\n`;

export interface SseEvent {
  readonly event: string;
  readonly data: string;
}

/** Incremental SSE parser (the subset of the WHATWG rules we emit and accept: event, data, comments). */
export class SseParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];

  push(chunk: string): SseEvent[] {
    this.buffer += chunk;
    const out: SseEvent[] = [];
    for (;;) {
      const nl = this.buffer.search(/\r\n|\n|\r/);
      if (nl < 0) break;
      const line = this.buffer.slice(0, nl);
      const sep = this.buffer.startsWith('\r\n', nl) ? 2 : 1;
      this.buffer = this.buffer.slice(nl + sep);
      if (line === '') {
        if (this.data.length > 0)
          out.push({ event: this.event === '' ? 'message' : this.event, data: this.data.join('\n') });
        this.event = '';
        this.data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') this.event = value;
      else if (field === 'data') this.data.push(value);
    }
    return out;
  }
}
