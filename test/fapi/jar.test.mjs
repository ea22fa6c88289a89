// FAPI 2.0 Message Signing (Final) 5.3, signed authorization requests, driven by oauth4webapi:
// a fapi2 client registered with require_signed_request_object signs its request with
// issueRequestObject (JAR, RFC 9101), pushes it (pushedAuthorizationRequest, private_key_jwt,
// DPoP), the user signs in and consents through the request_uri, and the DPoP code exchange
// gets tokens. Then what the server refuses: a plain push, and objects with a wrong aud, an
// expired one and an unsigned one.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { Browser, discover, fapiClient, insecure, keyPair, startServer, USER, withNonceRetry } from './lib.mjs';

const CLIENT_ID = 'fapi-jar';
let server, as, keys;

before(async () => {
  keys = { auth: await keyPair('PS256'), dpop: await keyPair('ES256') };
  server = await startServer((base) => ({
    clients: [fapiClient({
      id: CLIENT_ID, name: 'FAPI JAR App', redirectURI: `${base}/${CLIENT_ID}/callback`,
      require_signed_request_object: true, jwks: { keys: [keys.auth.jwk] }, id_token_signed_response_alg: 'ES256',
    })],
    users: [{ ...USER, email: 'fapi@example.com', email_verified: true }],
  }));
  as = await discover(server.issuer);
});

after(async () => { await server?.stop(); });

const client = { client_id: CLIENT_ID, id_token_signed_response_alg: 'ES256' };
const auth = () => oauth.PrivateKeyJwt({ key: keys.auth.privateKey, kid: keys.auth.jwk.kid });
const signingKey = () => ({ key: keys.auth.privateKey, kid: keys.auth.jwk.kid });
const redirectURI = () => `${server.base}/${CLIENT_ID}/callback`;

async function requestParams() {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const params = new URLSearchParams({
    redirect_uri: redirectURI(), response_type: 'code', scope: 'openid email', state, nonce,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
  });
  return { params, verifier, state, nonce };
}

// push sends a PAR request with body and returns oauth4webapi's processed answer (or throws).
function push(body, DPoP) {
  return withNonceRetry(
    () => oauth.pushedAuthorizationRequest(as, client, auth(), body, { DPoP, ...insecure }),
    (res) => oauth.processPushedAuthorizationResponse(as, client, res));
}

async function refused(body, error, what) {
  await assert.rejects(push(body), (err) => {
    assert.ok(err instanceof oauth.ResponseBodyError, `${what}: ${err}`);
    assert.equal(err.status, 400, what);
    assert.equal(err.error, error, `${what}: ${err.error_description}`);
    return true;
  });
}

test('discovery advertises the request object algorithms, and no request parameter at the authorization endpoint', () => {
  assert.deepEqual(as.request_object_signing_alg_values_supported, ['PS256', 'ES256']);
  assert.equal(as.request_parameter_supported, false);
});

test('issueRequestObject, PAR with the object (private_key_jwt, DPoP), login and consent, DPoP code exchange', async () => {
  const { params, verifier, state, nonce } = await requestParams();
  const DPoP = oauth.DPoP(client, { privateKey: keys.dpop.privateKey, publicKey: keys.dpop.publicKey });
  const request = await oauth.issueRequestObject(as, client, params, signingKey());
  const header = JSON.parse(Buffer.from(request.split('.')[0], 'base64url'));
  assert.equal(header.typ, 'oauth-authz-req+jwt');
  const pushed = await push(new URLSearchParams({ request }), DPoP);
  assert.match(pushed.request_uri, /^urn:ietf:params:oauth:request_uri:/);

  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({ client_id: CLIENT_ID, request_uri: pushed.request_uri });
  const callback = oauth.validateAuthResponse(as, client, await new Browser().authorize(url), state);
  const tokens = await withNonceRetry(
    () => oauth.authorizationCodeGrantRequest(as, client, auth(), callback, redirectURI(), verifier, { DPoP, ...insecure }),
    (res) => oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: nonce, requireIdToken: true }));
  assert.equal(tokens.token_type, 'dpop');
  assert.equal(oauth.getValidatedIdTokenClaims(tokens).sub, USER.uid);
});

test('refused: a push without a request object, and objects with a wrong aud, expired, or unsigned', async () => {
  const { params } = await requestParams();
  await refused(params, 'invalid_request', 'a plain push of a client that must sign');

  const wrongAud = await oauth.issueRequestObject(as, client, params, signingKey(), {
    [oauth.modifyAssertion]: (_, claims) => { claims.aud = 'https://attacker.example'; },
  });
  await refused(new URLSearchParams({ request: wrongAud }), 'invalid_request_object', 'aud another server');

  const expired = await oauth.issueRequestObject(as, client, params, signingKey(), {
    [oauth.modifyAssertion]: (_, claims) => { claims.nbf -= 600; claims.iat -= 600; claims.exp = claims.nbf + 60; },
  });
  await refused(new URLSearchParams({ request: expired }), 'invalid_request_object', 'expired');

  const now = Math.floor(Date.now() / 1000);
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const unsigned = `${b64({ alg: 'none', typ: 'oauth-authz-req+jwt' })}.${b64({
    ...Object.fromEntries(params), iss: CLIENT_ID, client_id: CLIENT_ID, aud: as.issuer, nbf: now, exp: now + 60,
  })}.`;
  await refused(new URLSearchParams({ request: unsigned }), 'invalid_request_object', 'unsigned (alg none)');
});
