// The key pair `authctl clients keygen` makes (docs/fapi-by-hand.md) works in a certified
// FAPI 2.0 client: for ES256 and PS256, oauth4webapi imports the private key from the PEM file
// keygen wrote, the client is registered with the public JWK Set keygen printed, as it is,
// and oauth4webapi runs PAR with private_key_jwt under the printed kid, the login and consent,
// the DPoP code exchange and userinfo. keygen's file is mode 0600, it refuses to overwrite it,
// and nothing of the private key is on its stdout or stderr.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';

import * as oauth from 'oauth4webapi';

import { Browser, discover, expectStatus, fapiClient, insecure, keyPair, startServer, USER, withNonceRetry } from './lib.mjs';

const run = promisify(execFile);
const ALGS = ['ES256', 'PS256'];

let dir, server, as;
const made = {};

// keygen runs `authctl clients keygen` (the binary test/fapi/run.sh builds) and returns its
// stdout and stderr; it opens no store, so it needs no data directory.
async function keygen(alg, out) {
  const bin = process.env.AUTHCTL;
  if (!bin) throw new Error('AUTHCTL is not set: run test/fapi/run.sh, which builds authctl');
  return run(bin, ['clients', 'keygen', '--alg', alg, '--out', out]);
}

// importPKCS8 reads keygen's PEM file as WebCrypto does: a non-extractable signing key.
async function importPKCS8(path, alg) {
  const pem = await readFile(path, 'utf8');
  const der = Buffer.from(pem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, '').replace(/\s+/g, ''), 'base64');
  const params = alg === 'ES256' ? { name: 'ECDSA', namedCurve: 'P-256' } : { name: 'RSA-PSS', hash: 'SHA-256' };
  return crypto.subtle.importKey('pkcs8', der, params, false, ['sign']);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fapi-keygen-'));
  for (const alg of ALGS) {
    const path = join(dir, `client-${alg}.pem`);
    const { stdout, stderr } = await keygen(alg, path);
    made[alg] = { path, stdout, stderr, jwks: JSON.parse(stdout), key: await importPKCS8(path, alg) };
  }
  server = await startServer((base) => ({
    clients: ALGS.map((alg) => fapiClient({
      id: `keygen-${alg.toLowerCase()}`, name: `Keygen ${alg} App`, redirectURI: `${base}/keygen-${alg.toLowerCase()}/callback`,
      jwks: made[alg].jwks, // as keygen printed it
      id_token_signed_response_alg: alg,
    })),
    users: [{ ...USER, email: 'fapi@example.com', email_verified: true }],
  }), { AUTH_DPOP_NONCES: "on" });
  as = await discover(server.issuer);
});

after(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

for (const alg of ALGS) {
  test(`keygen --alg ${alg}: a 0600 PEM file and a public JWK Set only, never overwritten`, async () => {
    const { path, stdout, stderr, jwks } = made[alg];
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    assert.equal(jwks.keys.length, 1);
    const [k] = jwks.keys;
    assert.equal(k.alg, alg);
    assert.equal(k.use, 'sig');
    assert.ok(k.kid, 'the key has a kid');
    for (const member of ['d', 'p', 'q', 'dp', 'dq', 'qi']) assert.equal(k[member], undefined, `private member ${member} printed`);
    assert.ok(!`${stdout}${stderr}`.includes('PRIVATE KEY'), 'the private key was printed');

    const before = await readFile(path, 'utf8');
    await assert.rejects(keygen(alg, path), (err) => err.code === 2 && /refusing to overwrite/.test(err.stderr));
    assert.equal(await readFile(path, 'utf8'), before, 'keygen changed an existing key file');
  });

  test(`oauth4webapi authenticates with the ${alg} key keygen made: PAR, consent, DPoP code exchange, userinfo`, async () => {
    const id = `keygen-${alg.toLowerCase()}`;
    const client = { client_id: id, id_token_signed_response_alg: alg };
    const auth = oauth.PrivateKeyJwt({ key: made[alg].key, kid: made[alg].jwks.keys[0].kid });
    const dpopKeys = await keyPair('ES256');
    const DPoP = oauth.DPoP(client, { privateKey: dpopKeys.privateKey, publicKey: dpopKeys.publicKey });
    const redirectURI = `${server.base}/${id}/callback`;
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const params = new URLSearchParams({
      redirect_uri: redirectURI, response_type: 'code', scope: 'openid email', state, nonce,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    });
    const pushed = await withNonceRetry(
      () => oauth.pushedAuthorizationRequest(as, client, auth, params, { DPoP, ...insecure }),
      (res) => oauth.processPushedAuthorizationResponse(as, client, res));
    const url = new URL(as.authorization_endpoint);
    url.search = new URLSearchParams({ client_id: id, request_uri: pushed.request_uri });
    const callback = oauth.validateAuthResponse(as, client, await new Browser().authorize(url), state);
    const tokens = await withNonceRetry(
      () => oauth.authorizationCodeGrantRequest(as, client, auth, callback, redirectURI, verifier, { DPoP, ...insecure }),
      (res) => oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: nonce, requireIdToken: true }));
    assert.equal(tokens.token_type, 'dpop');
    const claims = oauth.getValidatedIdTokenClaims(tokens);
    const info = await withNonceRetry(
      () => oauth.userInfoRequest(as, client, tokens.access_token, { DPoP, ...insecure }),
      (res) => oauth.processUserInfoResponse(as, client, claims.sub, res));
    assert.equal(info.email, 'fapi@example.com');
  });
}

test('a key other than the one keygen registered is refused at PAR (invalid_client)', async () => {
  const alg = 'ES256';
  const id = `keygen-${alg.toLowerCase()}`;
  const client = { client_id: id };
  const other = await keyPair(alg);
  // The registered kid, another private key: the assertion's signature does not verify.
  const auth = oauth.PrivateKeyJwt({ key: other.privateKey, kid: made[alg].jwks.keys[0].kid });
  const params = new URLSearchParams({
    redirect_uri: `${server.base}/${id}/callback`, response_type: 'code', scope: 'openid',
    code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
  });
  const res = await oauth.pushedAuthorizationRequest(as, client, auth, params, insecure);
  await expectStatus(res.clone(), 401, 'PAR with an assertion of another key under the registered kid');
  assert.equal((await res.json()).error, 'invalid_client');
});
