// A real OpenID provider (the npm package oidc-provider) for the gateway's integration test.
// Usage: node provider.mjs RESOURCE — listens on a loopback port the system picks (no race with another
// process for a port chosen beforehand) and prints "ready ISSUER" when it answers.
// Clients (client_credentials): sre-bot (groups [sre]), support-bot (groups [support]), both with a secret
// "<id>-secret". POST /rotate publishes a new signing key first (the old one stays published);
// POST /forge signs the JSON claims it is sent with the current key: for tokens the provider would never issue
// (expired, not yet valid) that still carry its real signature.
import crypto from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';
import { SignJWT, importJWK } from 'jose';

const resource = process.argv[2];
let issuer;
const groups = { 'sre-bot': ['sre'], 'support-bot': ['support'] };
let keys = [];
let current;

function newKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: `key-${keys.length + 1}`, alg: 'RS256', use: 'sig' };
}

function build() {
  const provider = new Provider(issuer, {
    clients: Object.keys(groups).map((id) => ({
      client_id: id, client_secret: `${id}-secret`, grant_types: ['client_credentials'],
      redirect_uris: [], response_types: [],
    })),
    jwks: { keys },
    scopes: ['tools'],
    features: {
      clientCredentials: { enabled: true },
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, wanted) => ({
          scope: 'tools', audience: wanted, accessTokenTTL: 300, accessTokenFormat: 'jwt',
        }),
      },
    },
    extraTokenClaims: (ctx, token) => ({ groups: groups[token.clientId] || [] }),
  });
  provider.proxy = false;
  return provider.callback();
}

async function forge(body) {
  const key = keys[0];
  const signing = await importJWK(key, 'RS256');
  return new SignJWT(JSON.parse(body)).setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' }).sign(signing);
}

keys = [newKey()];
const server = http.createServer((req, res) => {
  if (req.method === 'POST' && (req.url === '/rotate' || req.url === '/forge')) {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', async () => {
      if (req.url === '/rotate') {
        keys = [newKey(), ...keys];
        current = build();
        res.end(keys[0].kid);
      } else {
        res.end(await forge(body));
      }
    });
    return;
  }
  current(req, res);
});
server.listen(0, '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  current = build();
  console.log(`ready ${issuer}`);
});
process.on('SIGTERM', () => process.exit(0));
