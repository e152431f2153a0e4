// Pure rules that decide whether a request may reach the control plane at all (issue 17, first section; decision
// 0200): writes carry `Content-Type: application/json` (a browser cannot send that cross-site without a CORS
// preflight, which this API never grants); the `Host` header names this server (DNS rebinding); a present `Origin`
// is the API's own. No I/O: the accepted names and the port are parameters.

/** `application/json`, optionally with parameters (`; charset=utf-8`); case-insensitive. Nothing else. */
export const isJsonContentType = (value: string | undefined): boolean => {
  if (value === undefined) return false;
  const essence = (value.split(';')[0] ?? '').trim().toLowerCase();
  return essence === 'application/json';
};
