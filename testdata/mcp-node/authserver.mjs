// A local OAuth 2.1 authorization server for the checks, in Node's own
// crypto (no library shared with the Go side): it publishes its metadata
// (RFC 8414) and its JWK Set, and issues ES256-signed JWT access tokens
// (RFC 9068) by the client_credentials grant, for the resource the client
// names (RFC 8707), so that the official SDK's OAuth client can run its
// whole discovery against examples/mcp-server. sign() mints any token
// directly, for the tokens a server must refuse.
import { createServer } from 'node:http';
import { generateKeyPairSync, sign as cryptoSign, randomUUID } from 'node:crypto';

const b64url = (buf) => Buffer.from(buf).toString('base64url');

// The one registered client, acting for tenant-a / user-1.
export const CLIENT = { id: 'check-client', secret: 'check-secret', tenant: 'tenant-a', sub: 'user-1', scopes: 'orders:read orders:refund' };

// startAuthServer listens on 127.0.0.1:port and resolves once it does.
export function startAuthServer(port) {
  const issuer = `http://127.0.0.1:${port}`;
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const kid = `check-${randomUUID()}`;
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' };
  const issued = [];

  // sign returns a JWT of claims signed with this server's key (or with
  // another key, for a token it never issued).
  function sign(claims, key = privateKey) {
    const head = b64url(JSON.stringify({ alg: 'ES256', typ: 'at+jwt', kid }));
    const body = b64url(JSON.stringify(claims));
    const sig = cryptoSign('sha256', Buffer.from(`${head}.${body}`), { key, dsaEncoding: 'ieee-p1363' });
    return `${head}.${body}.${b64url(sig)}`;
  }
  // claims are those of a token for resource, valid for an hour.
  function claims(resource, scope, extra = {}) {
    const now = Math.floor(Date.now() / 1000);
    return { iss: issuer, aud: resource, sub: CLIENT.sub, tenant: CLIENT.tenant, client_id: CLIENT.id,
      scope, iat: now, exp: now + 3600, jti: randomUUID(), ...extra };
  }

  const json = (res, status, v) => {
    res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    res.end(JSON.stringify(v));
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url, issuer);
    if (req.method === 'GET' && url.pathname === '/.well-known/oauth-authorization-server') {
      return json(res, 200, {
        issuer, jwks_uri: `${issuer}/jwks`,
        authorization_endpoint: `${issuer}/authorize`, token_endpoint: `${issuer}/token`,
        response_types_supported: ['code'], grant_types_supported: ['client_credentials'],
        token_endpoint_auth_methods_supported: ['client_secret_basic'],
        code_challenge_methods_supported: ['S256'],
      });
    }
    if (req.method === 'GET' && url.pathname === '/jwks') return json(res, 200, { keys: [jwk] });
    if (req.method === 'POST' && url.pathname === '/token') {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        const [user, pass] = Buffer.from((req.headers.authorization || '').replace(/^Basic /, ''), 'base64')
          .toString().split(':').map(decodeURIComponent);
        if (user !== CLIENT.id || pass !== CLIENT.secret) return json(res, 401, { error: 'invalid_client' });
        const form = new URLSearchParams(body);
        if (form.get('grant_type') !== 'client_credentials') return json(res, 400, { error: 'unsupported_grant_type' });
        const resource = form.get('resource');
        if (!resource) return json(res, 400, { error: 'invalid_target', error_description: 'name the resource (RFC 8707)' });
        // No scope asked for: the client's registered scopes (RFC 6749, 3.3).
        const scope = form.get('scope') || CLIENT.scopes;
        issued.push({ resource, scope });
        return json(res, 200, { access_token: sign(claims(resource, scope)), token_type: 'Bearer', expires_in: 3600, scope });
      });
      return;
    }
    json(res, 404, { error: 'not_found' });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve({
      issuer, jwksUrl: `${issuer}/jwks`, sign, claims, issued,
      close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }),
    }));
  });
}
