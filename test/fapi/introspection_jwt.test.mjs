// JWT introspection responses (RFC 9701; FAPI 2.0 Message Signing (Final)) against the local
// server, verified by panva's oauth4webapi: introspectionRequest with requestJwtResponse sends
// Accept: application/token-introspection+jwt; processIntrospectionResponse checks the typ,
// iss, aud and iat and returns token_introspection, and validateApplicationLevelSignature the
// signature with our JWKS.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { Browser, discover, fapiClient, insecure, keyPair, startServer, USER, withNonceRetry } from './lib.mjs';

const ID = 'introspect-fapi';
let server, as, keys, tokens;

const client = { client_id: ID, id_token_signed_response_alg: 'ES256' };
const auth = () => oauth.PrivateKeyJwt({ key: keys.auth.privateKey, kid: keys.auth.jwk.kid });

before(async () => {
  keys = { auth: await keyPair('ES256'), dpop: await keyPair('ES256') };
  server = await startServer((base) => ({
    clients: [fapiClient({
      id: ID, name: 'Introspecting App', redirectURI: `${base}/cb`, jwks: { keys: [keys.auth.jwk] }, id_token_signed_response_alg: 'ES256',
    })],
    users: [{ ...USER, email: 'introspect@example.com', email_verified: true }],
  }));
  as = await discover(server.issuer);
  // One FAPI 2.0 flow for a DPoP-bound access token to introspect.
  const DPoP = oauth.DPoP(client, { privateKey: keys.dpop.privateKey, publicKey: keys.dpop.publicKey });
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const params = new URLSearchParams({
    redirect_uri: `${server.base}/cb`, response_type: 'code', scope: 'openid email', state,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
  });
  const pushed = await withNonceRetry(
    () => oauth.pushedAuthorizationRequest(as, client, auth(), params, { DPoP, ...insecure }),
    (res) => oauth.processPushedAuthorizationResponse(as, client, res));
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({ client_id: ID, request_uri: pushed.request_uri });
  const callback = oauth.validateAuthResponse(as, client, await new Browser().authorize(url), state);
  tokens = await withNonceRetry(
    () => oauth.authorizationCodeGrantRequest(as, client, auth(), callback, `${server.base}/cb`, verifier, { DPoP, ...insecure }),
    (res) => oauth.processAuthorizationCodeResponse(as, client, res));
});

after(async () => { await server?.stop(); });

test('discovery advertises the introspection signing algorithms', () => {
  for (const alg of ['PS256', 'ES256']) assert.ok(as.introspection_signing_alg_values_supported?.includes(alg), alg);
});

test('requestJwtResponse gets a signed token-introspection+jwt that processIntrospectionResponse verifies', async () => {
  const res = await oauth.introspectionRequest(as, client, auth(), tokens.access_token, { requestJwtResponse: true, ...insecure });
  assert.equal(res.headers.get('content-type'), 'application/token-introspection+jwt');
  const jwt = await res.clone().text();
  const header = JSON.parse(Buffer.from(jwt.split('.')[0], 'base64url'));
  assert.equal(header.typ, 'token-introspection+jwt');
  assert.equal(header.alg, 'ES256', 'a fapi2 client gets its id_token algorithm');
  const body = await oauth.processIntrospectionResponse(as, client, res, insecure);
  await oauth.validateApplicationLevelSignature(as, res, insecure);
  assert.equal(body.active, true);
  assert.equal(body.client_id, ID);
  assert.equal(body.sub, USER.uid);
  assert.equal(body.token_type, 'DPoP');
  assert.ok(body.cnf?.jkt, 'the DPoP binding is in the signed answer');
  // validateApplicationLevelSignature checked the signature with our JWKS: one that is not
  // ours is refused.
  const [h, p] = jwt.split('.');
  const forged = new Response(`${h}.${p}.${Buffer.from('x'.repeat(64)).toString('base64url')}`, {
    status: 200, headers: { 'content-type': 'application/token-introspection+jwt' },
  });
  await oauth.processIntrospectionResponse(as, client, forged, insecure);
  await assert.rejects(oauth.validateApplicationLevelSignature(as, forged, insecure));
});

test('an unknown token is answered active=false, signed', async () => {
  const res = await oauth.introspectionRequest(as, client, auth(), 'at_unknown', { requestJwtResponse: true, ...insecure });
  assert.equal(res.headers.get('content-type'), 'application/token-introspection+jwt');
  assert.deepEqual(await oauth.processIntrospectionResponse(as, client, res, insecure), { active: false });
});

test('without requestJwtResponse the answer is the plain JSON', async () => {
  const res = await oauth.introspectionRequest(as, client, auth(), tokens.access_token, insecure);
  assert.match(res.headers.get('content-type'), /^application\/json/);
  assert.equal((await oauth.processIntrospectionResponse(as, client, res, insecure)).active, true);
});
