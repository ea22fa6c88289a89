// Dynamic client registration (RFC 7591) driven by oauth4webapi: a third party registers a
// FAPI 2.0 client with dynamicClientRegistrationRequest and a software statement of the
// directory the server trusts (ES256, inline JWKS, profile fapi2), then uses the client it got
// for a PAR + private_key_jwt + DPoP flow: login and consent, the code exchange, userinfo.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { Browser, discover, insecure, keyPair, startServer, USER, withNonceRetry } from './lib.mjs';

const DIRECTORY = 'https://directory.example';
const REDIRECT_URI = 'https://tpp.example/cb';

let server, as, directory, auth, dpop;

// statement signs claims as the directory: a compact JWS, ES256 (WebCrypto's ECDSA signature
// is r || s, as JWS wants it).
async function statement(claims) {
  const enc = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const input = `${enc({ alg: 'ES256', kid: directory.jwk.kid, typ: 'JWT' })}.${enc(claims)}`;
  const sig = await crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, directory.privateKey, new TextEncoder().encode(input));
  return `${input}.${Buffer.from(sig).toString('base64url')}`;
}

before(async () => {
  directory = await keyPair('ES256');
  auth = await keyPair('PS256');
  dpop = await keyPair('ES256');
  const directories = [{ issuer: DIRECTORY, jwks: { keys: [directory.jwk] }, profile: 'fapi2' }];
  server = await startServer(() => ({ clients: [], users: [{ ...USER, email: 'tpp@example.com', email_verified: true }] }),
    { AUTH_REGISTRATION: 'on', AUTH_REGISTRATION_DIRECTORIES: JSON.stringify(directories) });
  as = await discover(server.issuer);
});

after(async () => { await server?.stop(); });

test('a client registered with a software statement runs the FAPI 2.0 flow', async () => {
  assert.equal(as.registration_endpoint, `${server.base}/v2/authentication/oauth2/register`);
  const now = Math.floor(Date.now() / 1000);
  const ssa = await statement({ iss: DIRECTORY, iat: now, exp: now + 600, software_id: 'tpp-1', client_name: 'Vouched TPP', redirect_uris: [REDIRECT_URI] });
  const res = await oauth.dynamicClientRegistrationRequest(as, {
    client_name: 'Name the directory overrides', redirect_uris: ['https://evil.example/cb'], scope: 'openid email',
    token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [auth.jwk] }, dpop_bound_access_tokens: true,
    id_token_signed_response_alg: 'PS256', require_pushed_authorization_requests: true, software_statement: ssa,
  }, insecure);
  const registered = await oauth.processDynamicClientRegistrationResponse(res);
  assert.match(registered.client_id, /^cl_/);
  assert.equal(registered.client_secret, undefined, 'a private_key_jwt client gets no secret');
  assert.equal(registered.client_name, 'Vouched TPP', 'the statement takes precedence');
  assert.deepEqual(registered.redirect_uris, [REDIRECT_URI]);
  assert.match(registered.registration_access_token, /^rat_/);

  const client = { client_id: registered.client_id, id_token_signed_response_alg: 'PS256' };
  const clientAuth = oauth.PrivateKeyJwt({ key: auth.privateKey, kid: auth.jwk.kid });
  const DPoP = oauth.DPoP(client, { privateKey: dpop.privateKey, publicKey: dpop.publicKey });
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const params = new URLSearchParams({
    redirect_uri: REDIRECT_URI, response_type: 'code', scope: 'openid email', state, nonce,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
  });
  const pushed = await withNonceRetry(
    () => oauth.pushedAuthorizationRequest(as, client, clientAuth, params, { DPoP, ...insecure }),
    (r) => oauth.processPushedAuthorizationResponse(as, client, r));
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({ client_id: client.client_id, request_uri: pushed.request_uri });
  const callback = oauth.validateAuthResponse(as, client, await new Browser().authorize(url), state);
  const tokens = await withNonceRetry(
    () => oauth.authorizationCodeGrantRequest(as, client, clientAuth, callback, REDIRECT_URI, verifier, { DPoP, ...insecure }),
    (r) => oauth.processAuthorizationCodeResponse(as, client, r, { expectedNonce: nonce, requireIdToken: true }));
  assert.equal(tokens.token_type, 'dpop');
  const claims = oauth.getValidatedIdTokenClaims(tokens);
  assert.equal(claims.sub, USER.uid);
  const info = await withNonceRetry(
    () => oauth.userInfoRequest(as, client, tokens.access_token, { DPoP, ...insecure }),
    (r) => oauth.processUserInfoResponse(as, client, claims.sub, r));
  assert.equal(info.email, 'tpp@example.com');

  // The registration access token reads the registration (RFC 7592).
  const read = await fetch(registered.registration_client_uri, { headers: { authorization: `Bearer ${registered.registration_access_token}` } });
  assert.equal(read.status, 200);
  assert.equal((await read.json()).client_id, registered.client_id);
});

test('a registration without a token or statement is refused by the client library', async () => {
  const res = await oauth.dynamicClientRegistrationRequest(as, { redirect_uris: [REDIRECT_URI], client_name: 'Nobody' }, insecure);
  await assert.rejects(oauth.processDynamicClientRegistrationResponse(res), (err) => {
    assert.equal(res.status, 401);
    return err instanceof oauth.WWWAuthenticateChallengeError || err instanceof oauth.ResponseBodyError;
  });
});
