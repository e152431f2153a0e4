/**
 * Reading one value of a top-level map without decoding the map, e.g. a message's `kind` to choose the codec that then
 * decodes the whole input once. The headers are read by the decoder's own `Reader.head` (shortest form, profile
 * items); the values before the key are skipped by their lengths, nothing is built.
 */
import { Reader } from './reader.js';
import { encodeKeyOrText } from './codec.js';

/**
 * A reader of the text value of `key` in a top-level map: `undefined` when the input is not a map, the key is absent,
 * its value is not text, or anything read before it is malformed. A hint, not a decode: nothing after the key is read
 * and the skipped values are not checked (key order, UTF-8, depth), so a text may come back for an input the decoder
 * refuses. Choose a codec with it and let that codec's strict decode decide.
 */
export const topLevelText = (key: string): ((bytes: Uint8Array) => string | undefined) => {
  const encodedKey = encodeKeyOrText(key);
  return (bytes) => {
    try {
      const r = new Reader(bytes, undefined);
      if (nextMajor(r) !== 5) return undefined;
      const entries = r.length(2);
      for (let i = 0; i < entries; i++) {
        if (nextMajor(r) !== 3) return undefined;
        const keyStart = r.at;
        r.pos += r.length(1);
        if (sameBytes(bytes, keyStart, r.pos, encodedKey)) return nextMajor(r) === 3 ? r.text() : undefined;
        skipOne(r);
      }
      return undefined;
    } catch {
      // the Reader throws on anything malformed: no hint, the caller's strict decode reports it
      return undefined;
    }
  };
};

/**
 * Skips one item by its headers: a string by its length, a container by adding its items to those left to skip. Every
 * header consumes at least one byte and `length` refuses a count the remaining bytes cannot hold, so the work is
 * bounded by the input's length (no recursion).
 */
const skipOne = (r: Reader): void => {
  let left = 1;
  while (left > 0) {
    left--;
    switch (nextMajor(r)) {
      case 2:
      case 3:
        r.pos += r.length(1);
        break;
      case 4:
        left += r.length(1);
        break;
      case 5:
        left += 2 * r.length(2);
        break;
      default: // an unsigned integer or a simple value: the header was all of it
        break;
    }
  }
};

/** Reads the next header; its major type (a call, so that the type of `r.major` is not narrowed across reads). */
const nextMajor = (r: Reader): number => {
  r.head();
  return r.major;
};

const sameBytes = (d: Uint8Array, start: number, end: number, want: Uint8Array): boolean => {
  if (end - start !== want.length) return false;
  for (let i = 0; i < want.length; i++) if (d[start + i] !== want[i]) return false;
  return true;
};
