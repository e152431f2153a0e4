import { describe, expect, it } from 'vitest';
import { permissionFlag } from './extension-sandbox.js';

describe('the extension sandbox permission flag', () => {
  it('is --experimental-permission before Node 22.13 and --permission from 22.13 on (Node 24 dropped the old name)', () => {
    expect(permissionFlag('20.20.2')).toBe('--experimental-permission');
    expect(permissionFlag('22.12.0')).toBe('--experimental-permission');
    expect(permissionFlag('22.13.0')).toBe('--permission');
    expect(permissionFlag('24.1.0')).toBe('--permission');
  });
});
