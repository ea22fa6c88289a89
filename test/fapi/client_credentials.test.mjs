// The client_credentials grant (RFC 6749 4.4) for a FAPI 2.0 client, driven by oauth4webapi's
// clientCredentialsGrantRequest: private_key_jwt and a DPoP proof, a DPoP-bound access token
// without refresh token or id_token, accepted by the bank API with its proof on a route that
// takes client-only tokens and refused on one that does not; openid refused.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { discover, fapiClient, insecure, keyPair, startServer, withNonceRetry } from './lib.mjs';

const ID = 'fapi-m2m';
let server, as, keys;

before(async () => {
  keys = { auth: await keyPair('ES256'), dpop: await keyPair('ES256') };
  server = await startServer((base) => ({
    clients: [fapiClient({
      id: ID, name: 'FAPI Machine', redirectURI: `${base}/${ID}/callback`, scopes: ['openid', 'bank:transfers:write'],
      jwks: { keys: [keys.auth.jwk] }, id_token_signed_response_alg: 'ES256', grant_types: ['client_credentials'],
    })],
    users: [],
  }), {
    AUTH_ROUTE_SCOPES: JSON.stringify({ 'GET /v2/bank/accounts': ['bank:transfers:write'], 'GET /invoicing/invoices': ['bank:transfers:write'] }),
    AUTH_CLIENT_TOKEN_ROUTES: 'GET /v2/bank/accounts',
  });
  as = await discover(server.issuer);
});

after(async () => { await server?.stop(); });

const client = { client_id: ID };
const auth = () => oauth.PrivateKeyJwt({ key: keys.auth.privateKey, kid: keys.auth.jwk.kid });
const dpop = () => oauth.DPoP(client, { privateKey: keys.dpop.privateKey, publicKey: keys.dpop.publicKey });

test('discovery advertises client_credentials', () => {
  assert.ok(as.grant_types_supported.includes('client_credentials'), JSON.stringify(as.grant_types_supported));
});

test('a fapi2 client gets a DPoP-bound client-only token with private_key_jwt, used at the bank API with its proof', async () => {
  const DPoP = dpop();
  const tokens = await withNonceRetry(
    () => oauth.clientCredentialsGrantRequest(as, client, auth(), new URLSearchParams({ scope: 'bank:transfers:write' }), { DPoP, ...insecure }),
    (res) => oauth.processClientCredentialsResponse(as, client, res));
  assert.equal(tokens.token_type, 'dpop');
  assert.equal(tokens.scope, 'bank:transfers:write');
  assert.equal(tokens.refresh_token, undefined, 'no refresh token');
  assert.equal(tokens.id_token, undefined, 'no id_token');
  assert.equal(tokens.metadata, undefined, 'no user metadata');

  const call = (path) => withNonceRetry(
    () => oauth.protectedResourceRequest(tokens.access_token, 'GET', new URL(path, server.base), undefined, undefined, { DPoP, ...insecure }),
    async (res) => res);
  const ok = await call('/v2/bank/accounts');
  assert.equal(ok.status, 200, await ok.clone().text());
  const id = await ok.json();
  assert.equal(id.client_id, ID);
  assert.equal(id.uid, '');
  // A route that does not take client-only tokens refuses it: 403 insufficient_scope, which
  // oauth4webapi raises as the challenge.
  await assert.rejects(call('/invoicing/invoices'),
    (err) => err instanceof oauth.WWWAuthenticateChallengeError && err.status === 403 &&
      err.cause.some((c) => c.parameters.error === 'insufficient_scope'));

  const bearer = await fetch(new URL('/v2/bank/accounts', server.base), { headers: { authorization: `Bearer ${tokens.access_token}` } });
  assert.equal(bearer.status, 401, 'the DPoP-bound token is refused as Bearer');
});

test('openid is refused: a client-only token has no user', async () => {
  await assert.rejects(
    withNonceRetry(
      () => oauth.clientCredentialsGrantRequest(as, client, auth(), new URLSearchParams({ scope: 'openid' }), { DPoP: dpop(), ...insecure }),
      (res) => oauth.processClientCredentialsResponse(as, client, res)),
    (err) => err instanceof oauth.ResponseBodyError && err.error === 'invalid_scope');
});
