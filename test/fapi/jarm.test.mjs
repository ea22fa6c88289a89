// JARM (JWT Secured Authorization Response Mode; FAPI 2.0 Message Signing (Final) 5.4) against
// the local server, verified by panva's oauth4webapi: a FAPI 2.0 client pushes its request with
// response_mode=jwt (private_key_jwt, DPoP), the user signs in and consents, and
// validateJwtAuthResponse verifies the signed response (our JWKS, iss, aud, exp) before the
// code is exchanged; a denial comes back signed too, and a tampered response is refused.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { Browser, discover, expectStatus, fapiClient, insecure, keyPair, startServer, USER, withNonceRetry } from './lib.mjs';

const ID = 'jarm-fapi';
let server, as, keys;

before(async () => {
  keys = { auth: await keyPair('ES256'), dpop: await keyPair('ES256') };
  server = await startServer((base) => ({
    clients: [fapiClient({
      id: ID, name: 'JARM App', redirectURI: `${base}/cb`, jwks: { keys: [keys.auth.jwk] }, id_token_signed_response_alg: 'PS256',
    })],
    users: [{ ...USER, email: 'jarm@example.com', email_verified: true }],
  }));
  as = await discover(server.issuer);
});

after(async () => { await server?.stop(); });

// client is the relying party's metadata: it expects PS256 responses (its id_token algorithm,
// the server's default for a fapi2 client's JARM responses).
const client = { client_id: ID, authorization_signed_response_alg: 'PS256', id_token_signed_response_alg: 'PS256' };
const auth = () => oauth.PrivateKeyJwt({ key: keys.auth.privateKey, kid: keys.auth.jwk.kid });

// push sends the request with response_mode and returns the authorization URL, the state and
// the PKCE verifier.
async function push(responseMode, DPoP) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const params = new URLSearchParams({
    redirect_uri: `${server.base}/cb`, response_type: 'code', scope: 'openid email', state, response_mode: responseMode,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    prompt: 'consent', // the denial needs the consent page, even after the first test's grant
  });
  const pushed = await withNonceRetry(
    () => oauth.pushedAuthorizationRequest(as, client, auth(), params, { DPoP, ...insecure }),
    (res) => oauth.processPushedAuthorizationResponse(as, client, res));
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({ client_id: ID, request_uri: pushed.request_uri });
  return { url, state, verifier };
}

test('discovery advertises JARM', () => {
  for (const mode of ['jwt', 'query.jwt']) assert.ok(as.response_modes_supported?.includes(mode), mode);
  for (const alg of ['PS256', 'ES256']) assert.ok(as.authorization_signing_alg_values_supported?.includes(alg), alg);
});

test('a pushed request with response_mode=jwt gets a signed response that validateJwtAuthResponse accepts, and its code exchanges', async () => {
  const DPoP = oauth.DPoP(client, { privateKey: keys.dpop.privateKey, publicKey: keys.dpop.publicKey });
  const { url, state, verifier } = await push('jwt', DPoP);
  const callback = await new Browser().authorize(url);
  assert.deepEqual([...callback.searchParams.keys()], ['response'], 'the redirect carries the response parameter only');
  const header = JSON.parse(Buffer.from(callback.searchParams.get('response').split('.')[0], 'base64url'));
  assert.equal(header.alg, 'PS256');
  const params = await oauth.validateJwtAuthResponse(as, client, callback, state, insecure);
  assert.ok(params.get('code'));
  const tokens = await withNonceRetry(
    () => oauth.authorizationCodeGrantRequest(as, client, auth(), params, `${server.base}/cb`, verifier, { DPoP, ...insecure }),
    (res) => oauth.processAuthorizationCodeResponse(as, client, res, { requireIdToken: true }));
  assert.equal(tokens.token_type, 'dpop');
});

test('a denial with response_mode=query.jwt comes back signed: access_denied with the state', async () => {
  const { url, state } = await push('query.jwt');
  const b = new Browser();
  let res = await b.fetch(url);
  await expectStatus(res, 200, 'the login page');
  res = await b.submit(url, await res.text(), { username: USER.username, password: USER.password });
  await expectStatus(res, 200, 'the consent page');
  res = await b.submit(url, await res.text(), { decision: 'deny' });
  await expectStatus(res, 303, 'the redirect after the denial');
  const callback = new URL(res.headers.get('location'));
  assert.deepEqual([...callback.searchParams.keys()], ['response']);
  await assert.rejects(oauth.validateJwtAuthResponse(as, client, callback, state, insecure), (err) => {
    assert.ok(err instanceof oauth.AuthorizationResponseError, `${err}`);
    assert.equal(err.error, 'access_denied');
    return true;
  });
});

test('a tampered response is refused', async () => {
  const { url, state } = await push('jwt');
  const callback = await new Browser().authorize(url);
  const [h, p, s] = callback.searchParams.get('response').split('.');
  const claims = JSON.parse(Buffer.from(p, 'base64url'));
  claims.state = oauth.generateRandomState();
  const forged = new URL(callback);
  forged.search = new URLSearchParams({ response: [h, Buffer.from(JSON.stringify(claims)).toString('base64url'), s].join('.') });
  await assert.rejects(oauth.validateJwtAuthResponse(as, client, forged, claims.state, insecure));
  // The genuine one still validates.
  assert.ok((await oauth.validateJwtAuthResponse(as, client, callback, state, insecure)).get('code'));
});
