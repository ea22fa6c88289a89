// A FAPI 2.0 client whose keys the server fetches from the client's jwks_uri (RFC 7591 2),
// driven by oauth4webapi: the client serves its JWK Set over https (node:https, a self-signed
// certificate made with openssl that the server is started to trust through SSL_CERT_FILE, and
// AUTH_JWKS_URI_ALLOW_PRIVATE=true since the client's host is loopback); PAR and the code
// exchange authenticate with private_key_jwt, DPoP-bound; an assertion by a key the client
// does not publish is invalid_client.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';

import * as oauth from 'oauth4webapi';

import { Browser, discover, fapiClient, insecure, keyPair, startServer, USER, withNonceRetry } from './lib.mjs';

const CLIENT_ID = 'fapi-jwks-uri';
let server, as, keyHost, certDir, authKey, dpopKey;
let fetches = 0;

// startKeyHost serves the public JWK Set of keys at https://127.0.0.1:<port>/jwks.json with a
// self-signed certificate for 127.0.0.1, whose PEM file it returns for the server to trust.
async function startKeyHost(jwks) {
  certDir = await mkdtemp(join(tmpdir(), 'jwks-uri-'));
  const key = join(certDir, 'key.pem');
  const cert = join(certDir, 'cert.pem');
  await promisify(execFile)('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-days', '1', '-keyout', key, '-out', cert]);
  const host = createServer({ key: await readFile(key), cert: await readFile(cert) }, (req, res) => {
    fetches++;
    res.setHeader('content-type', 'application/jwk-set+json');
    res.end(JSON.stringify({ keys: jwks }));
  });
  await new Promise((resolve, reject) => host.listen(0, '127.0.0.1', resolve).on('error', reject));
  return { host, cert, uri: `https://127.0.0.1:${host.address().port}/jwks.json` };
}

before(async () => {
  authKey = await keyPair('ES256');
  dpopKey = await keyPair('ES256');
  keyHost = await startKeyHost([authKey.jwk]);
  server = await startServer((base) => ({
    clients: [fapiClient({
      id: CLIENT_ID, name: 'FAPI jwks_uri App', redirectURI: `${base}/${CLIENT_ID}/callback`,
      jwks_uri: keyHost.uri, id_token_signed_response_alg: 'ES256',
    })],
    users: [{ ...USER, email: 'fapi@example.com', email_verified: true, name: 'Fay Api' }],
  }), { AUTH_JWKS_URI_ALLOW_PRIVATE: 'true', SSL_CERT_FILE: keyHost.cert });
  as = await discover(server.issuer);
});

after(async () => {
  await server?.stop();
  keyHost?.host.close();
  if (certDir) await rm(certDir, { recursive: true, force: true });
});

const client = { client_id: CLIENT_ID, id_token_signed_response_alg: 'ES256' };

function pushParams(redirectURI, challenge, state, nonce) {
  return new URLSearchParams({
    redirect_uri: redirectURI, response_type: 'code', scope: 'openid email', state, nonce,
    code_challenge: challenge, code_challenge_method: 'S256',
  });
}

test('PAR and the DPoP code exchange with private_key_jwt verified by the keys at the jwks_uri', async () => {
  const auth = oauth.PrivateKeyJwt({ key: authKey.privateKey, kid: authKey.jwk.kid });
  const DPoP = oauth.DPoP(client, { privateKey: dpopKey.privateKey, publicKey: dpopKey.publicKey });
  const redirectURI = `${server.base}/${CLIENT_ID}/callback`;
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const params = pushParams(redirectURI, await oauth.calculatePKCECodeChallenge(verifier), state, nonce);
  const pushed = await withNonceRetry(
    () => oauth.pushedAuthorizationRequest(as, client, auth, params, { DPoP, ...insecure }),
    (res) => oauth.processPushedAuthorizationResponse(as, client, res));
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({ client_id: CLIENT_ID, request_uri: pushed.request_uri });
  const callback = oauth.validateAuthResponse(as, client, await new Browser().authorize(url), state);
  const tokens = await withNonceRetry(
    () => oauth.authorizationCodeGrantRequest(as, client, auth, callback, redirectURI, verifier, { DPoP, ...insecure }),
    (res) => oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: nonce, requireIdToken: true }));
  assert.equal(tokens.token_type, 'dpop');
  assert.equal(oauth.getValidatedIdTokenClaims(tokens).sub, USER.uid);
  assert.equal(fetches, 1, 'the jwks_uri was fetched once, at first use, and cached for the token request');
});

test('an assertion signed by a key the client does not publish is invalid_client', async () => {
  const stranger = await keyPair('ES256');
  const auth = oauth.PrivateKeyJwt({ key: stranger.privateKey, kid: authKey.jwk.kid });
  const DPoP = oauth.DPoP(client, { privateKey: dpopKey.privateKey, publicKey: dpopKey.publicKey });
  const challenge = await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier());
  const params = pushParams(`${server.base}/${CLIENT_ID}/callback`, challenge, 's', 'n');
  const res = await oauth.pushedAuthorizationRequest(as, client, auth, params, { DPoP, ...insecure });
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error, 'invalid_client');
  assert.equal(fetches, 1, 'a kid the cached set holds is not fetched again');
});
