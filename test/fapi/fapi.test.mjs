// FAPI 2.0 flows against the local server, driven by panva's oauth4webapi (a certified FAPI 2.0
// client): discovery, a pushed authorization request with private_key_jwt, the user's login
// and consent on our pages, the code exchange with DPoP and PKCE S256, the id_token (PS256 for
// one client, ES256 for the other) verified against our JWKS, userinfo with DPoP, a refresh
// with DPoP, revocation; a request_uri opened again (a prefetch, a reload, another client_id)
// and spent at the decision; then what the profile refuses.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { Browser, discover, expectStatus, fapiClient, insecure, keyPair, nonceRetries, startServer, USER, withNonceRetry } from './lib.mjs';

// Each FAPI client authenticates with one key (private_key_jwt) and binds its tokens to another
// (DPoP); between them the two clients use both algorithms FAPI 2.0 allows for each.
const CLIENTS = [
  { id: 'fapi-ps256', idTokenAlg: 'PS256', authAlg: 'PS256', dpopAlg: 'ES256' },
  { id: 'fapi-es256', idTokenAlg: 'ES256', authAlg: 'ES256', dpopAlg: 'PS256' },
];

let server, as;
const keys = {};

function fapiSeedClient(c, base) {
  return fapiClient({
    id: c.id, name: `FAPI ${c.idTokenAlg} App`, redirectURI: `${base}/${c.id}/callback`,
    scopes: ['openid', 'email', 'profile'], jwks: { keys: [keys[c.id].auth.jwk] }, id_token_signed_response_alg: c.idTokenAlg,
  });
}

before(async () => {
  for (const c of CLIENTS) keys[c.id] = { auth: await keyPair(c.authAlg), dpop: await keyPair(c.dpopAlg) };
  // Server nonces on (RFC 9449 8): every first proof of a DPoP handle is answered
  // use_dpop_nonce, and oauth4webapi retries with the nonce.
  server = await startServer((base) => ({
    clients: CLIENTS.map((c) => fapiSeedClient(c, base)),
    users: [{ ...USER, email: 'fapi@example.com', email_verified: true, name: 'Fay Api' }],
  }), { AUTH_DPOP_NONCES: "on" });
  as = await discover(server.issuer);
});

after(async () => { await server?.stop(); });

// fapi is one client's view of the flow: its metadata, authentication and DPoP key.
function fapi(c) {
  const client = { client_id: c.id, id_token_signed_response_alg: c.idTokenAlg };
  const auth = oauth.PrivateKeyJwt({ key: keys[c.id].auth.privateKey, kid: keys[c.id].auth.jwk.kid });
  const dpop = () => oauth.DPoP(client, { privateKey: keys[c.id].dpop.privateKey, publicKey: keys[c.id].dpop.publicKey });
  const redirectURI = `${server.base}/${c.id}/callback`;
  return { client, auth, dpop, redirectURI };
}

// authorizeWithPAR pushes the request (private_key_jwt, and DPoP when given, which binds the
// code to the key: RFC 9449 10), opens the authorization URL with client_id and request_uri
// only, signs in, consents, and returns the validated callback parameters.
async function authorizeWithPAR(c, { DPoP } = {}) {
  const { client, auth, redirectURI } = fapi(c);
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
  assert.match(pushed.request_uri, /^urn:ietf:params:oauth:request_uri:/);
  assert.ok(pushed.expires_in >= 5 && pushed.expires_in <= 600, `expires_in ${pushed.expires_in} is between 5 and 600 (FAPI 2.0)`);
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({ client_id: client.client_id, request_uri: pushed.request_uri });
  const callback = await new Browser().authorize(url);
  return { callback: oauth.validateAuthResponse(as, client, callback, state), verifier, nonce, requestURI: pushed.request_uri };
}

test('discovery advertises what a FAPI 2.0 client needs', () => {
  assert.match(as.pushed_authorization_request_endpoint ?? '', /\/par$/);
  assert.ok(as.token_endpoint_auth_methods_supported?.includes('private_key_jwt'));
  for (const alg of ['PS256', 'ES256']) {
    assert.ok(as.id_token_signing_alg_values_supported?.includes(alg), `id_token ${alg}`);
    assert.ok(as.dpop_signing_alg_values_supported?.includes(alg), `DPoP ${alg}`);
  }
  assert.ok(as.code_challenge_methods_supported?.includes('S256'));
  assert.equal(as.authorization_response_iss_parameter_supported, true);
  // FAPI 2.0 (Final) 5.4.1: EdDSA is a proof algorithm too.
  assert.ok(as.dpop_signing_alg_values_supported?.includes('EdDSA'), 'DPoP EdDSA');
  // Only what works is announced: no silent authentication yet, and no certificate-bound
  // tokens without a mutual-TLS connect host (the local server here has none).
  assert.ok(!as.prompt_values_supported?.includes('none'), 'prompt=none is not announced');
  assert.equal(as.tls_client_certificate_bound_access_tokens, undefined);
});

for (const c of CLIENTS) {
  describe(`FAPI 2.0 client with ${c.idTokenAlg} id_tokens`, () => {
    test('PAR with private_key_jwt, login and consent, DPoP code exchange, userinfo, refresh and revocation', async () => {
      const { client, auth, dpop, redirectURI } = fapi(c);
      const DPoP = dpop();
      const retried = nonceRetries.count;
      const { callback, verifier, nonce } = await authorizeWithPAR(c, { DPoP });
      assert.equal(nonceRetries.count, retried + 1, 'the first proof (at PAR) was answered use_dpop_nonce');

      let response;
      const tokens = await withNonceRetry(
        async () => (response = await oauth.authorizationCodeGrantRequest(as, client, auth, callback, redirectURI, verifier, { DPoP, ...insecure })),
        (res) => oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: nonce, requireIdToken: true }));
      await oauth.validateApplicationLevelSignature(as, response, insecure);
      assert.equal(tokens.token_type, 'dpop');
      const header = JSON.parse(Buffer.from(tokens.id_token.split('.')[0], 'base64url'));
      assert.equal(header.alg, c.idTokenAlg);
      const claims = oauth.getValidatedIdTokenClaims(tokens);
      assert.equal(claims.sub, USER.uid);

      const info = await withNonceRetry(
        () => oauth.userInfoRequest(as, client, tokens.access_token, { DPoP, ...insecure }),
        (res) => oauth.processUserInfoResponse(as, client, claims.sub, res));
      assert.equal(info.email, 'fapi@example.com');

      // The same access token without its proof, as a Bearer token, is refused (RFC 9449 7.1).
      const bearer = await fetch(as.userinfo_endpoint, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      assert.equal(bearer.status, 401);

      const refreshed = await withNonceRetry(
        () => oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token, { DPoP, ...insecure }),
        (res) => oauth.processRefreshTokenResponse(as, client, res));
      assert.equal(refreshed.token_type, 'dpop');
      // FAPI 2.0 5.3.2.1: the refresh token does not rotate; it refreshes again.
      assert.equal(refreshed.refresh_token, tokens.refresh_token, 'the refresh token of a fapi2 client rotated');
      assert.notEqual(refreshed.access_token, tokens.access_token);
      await withNonceRetry(
        () => oauth.userInfoRequest(as, client, refreshed.access_token, { DPoP, ...insecure }),
        (res) => oauth.processUserInfoResponse(as, client, claims.sub, res));

      // The refresh token is bound to the DPoP key too: another key cannot spend it.
      const thief = oauth.DPoP(client, await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify']));
      await assert.rejects(withNonceRetry(
        () => oauth.refreshTokenGrantRequest(as, client, auth, refreshed.refresh_token, { DPoP: thief, ...insecure }),
        (res) => oauth.processRefreshTokenResponse(as, client, res)), (err) => err.error === 'invalid_grant' || err.error === 'invalid_dpop_proof');

      await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, refreshed.refresh_token, insecure));
      const gone = await withNonceRetry(
        () => oauth.userInfoRequest(as, client, refreshed.access_token, { DPoP, ...insecure }),
        async (res) => res);
      assert.equal(gone.status, 401, 'revoking the refresh token ends its access token at once');
    });
  });
}

// The request_uri is one-time at the authorization decision (FAPI 2.0 Security Profile (Final)
// 5.3.2.2, the note on request_uri reuse): opening the page does not spend it.
describe('a request_uri is spent at the decision', () => {
  const c = CLIENTS[0];

  // push pushes a request of c and returns the authorization URL and the state.
  async function push() {
    const { client, auth, redirectURI } = fapi(c);
    const state = oauth.generateRandomState();
    const params = new URLSearchParams({
      redirect_uri: redirectURI, response_type: 'code', scope: 'openid', state,
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
      prompt: 'consent', // the consent page is what these tests decide on, even after an earlier grant
    });
    const DPoP = fapi(c).dpop();
    const pushed = await withNonceRetry(
      () => oauth.pushedAuthorizationRequest(as, client, auth, params, { DPoP, ...insecure }),
      (res) => oauth.processPushedAuthorizationResponse(as, client, res));
    const url = new URL(as.authorization_endpoint);
    url.search = new URLSearchParams({ client_id: client.client_id, request_uri: pushed.request_uri });
    return { client, url, state, requestURI: pushed.request_uri };
  }

  test('a prefetch and a reload open the page again; only the first decision gets a code', async () => {
    const { client, url, state } = await push();
    const prefetch = new Browser();
    const prefetched = await prefetch.fetch(url);
    await expectStatus(prefetched.clone(), 200, 'the prefetched login page');
    const user = new Browser();
    await expectStatus(await user.fetch(url), 200, 'the login page, before the reload');
    const callback = await user.authorize(url);
    const params = oauth.validateAuthResponse(as, client, callback, state);
    assert.ok(params.get('code'), 'the decision after a reload gets a code');

    await expectStatus(await new Browser().fetch(url), 400, 'the request_uri opened after its decision');
    let res = await prefetch.submit(url, await prefetched.text(), { username: USER.username, password: USER.password });
    await expectStatus(res, 200, 'the consent page of the prefetched page');
    res = await prefetch.submit(url, await res.text(), { decision: 'allow' });
    await expectStatus(res.clone(), 400, 'the prefetched page decided after the request_uri was spent');
    assert.equal(res.headers.get('location'), null);
  });

  test('another client_id changes nothing: the right client still gets its code', async () => {
    const { client, url, state, requestURI } = await push();
    for (const clientID of [CLIENTS[1].id, 'no-such-client']) {
      const other = new URL(as.authorization_endpoint);
      other.search = new URLSearchParams({ client_id: clientID, request_uri: requestURI });
      const res = await new Browser().fetch(other);
      await expectStatus(res.clone(), 400, `the request_uri with client_id ${clientID}`);
      assert.equal(res.headers.get('location'), null);
    }
    const params = oauth.validateAuthResponse(as, client, await new Browser().authorize(url), state);
    assert.ok(params.get('code'));
  });
});

describe('what the FAPI 2.0 profile refuses', () => {
  const c = CLIENTS[0];

  test('a plain authorization request, without PAR', async () => {
    const { client, redirectURI } = fapi(c);
    const url = new URL(as.authorization_endpoint);
    url.search = new URLSearchParams({
      client_id: client.client_id, redirect_uri: redirectURI, response_type: 'code', scope: 'openid', state: 'st-1',
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
    });
    const res = await new Browser().fetch(url);
    assert.equal(res.status, 303, 'the refusal goes back to the client with 303 (FAPI 2.0 5.3.2.2)');
    const to = new URL(res.headers.get('location'));
    assert.equal(to.origin + to.pathname, redirectURI);
    assert.equal(to.searchParams.get('error'), 'invalid_request');
    assert.equal(to.searchParams.get('state'), 'st-1');
    assert.equal(to.searchParams.get('iss'), as.issuer);
    assert.equal(to.searchParams.get('code'), null);
  });

  test('a pushed request without PKCE, or without redirect_uri', async () => {
    const { client, auth, redirectURI } = fapi(c);
    for (const params of [
      { redirect_uri: redirectURI, response_type: 'code', scope: 'openid' },
      { response_type: 'code', scope: 'openid', code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256' },
    ]) {
      const res = await oauth.pushedAuthorizationRequest(as, client, auth, new URLSearchParams(params), insecure);
      await assert.rejects(oauth.processPushedAuthorizationResponse(as, client, res),
        (err) => err.error === 'invalid_request', `PAR with ${Object.keys(params).join(', ')}`);
    }
  });

  test('a client assertion whose aud is not the issuer as a string (FAPI 2.0 5.3.2.1)', async () => {
    const { client, redirectURI } = fapi(c);
    const params = new URLSearchParams({
      redirect_uri: redirectURI, response_type: 'code', scope: 'openid',
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
    });
    for (const aud of [as.token_endpoint, as.pushed_authorization_request_endpoint, [as.issuer], `${as.issuer}/`]) {
      const auth = oauth.PrivateKeyJwt({ key: keys[c.id].auth.privateKey, kid: keys[c.id].auth.jwk.kid },
        { [oauth.modifyAssertion]: (_header, payload) => { payload.aud = aud; } });
      const res = await oauth.pushedAuthorizationRequest(as, client, auth, params, insecure);
      await expectStatus(res.clone(), 401, `PAR with aud ${JSON.stringify(aud)}`);
      assert.equal((await res.json()).error, 'invalid_client');
    }
  });

  test('an RS256 DPoP proof (FAPI 2.0 5.4.1)', async () => {
    const { client, auth, redirectURI } = fapi(c);
    const rs = await crypto.subtle.generateKey({ name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) }, false, ['sign', 'verify']);
    const DPoP = oauth.DPoP(client, rs);
    const params = new URLSearchParams({
      redirect_uri: redirectURI, response_type: 'code', scope: 'openid',
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
    });
    await assert.rejects(withNonceRetry(
      () => oauth.pushedAuthorizationRequest(as, client, auth, params, { DPoP, ...insecure }),
      (res) => oauth.processPushedAuthorizationResponse(as, client, res)),
    (err) => err.error === 'invalid_dpop_proof');
  });

  test('a DPoP proof whose iat is 8 s ahead is accepted, 25 s ahead refused (FAPI 2.0 5.3.2.1: up to 10 s)', async () => {
    const { auth, redirectURI } = fapi(c);
    const params = new URLSearchParams({
      redirect_uri: redirectURI, response_type: 'code', scope: 'openid',
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
    });
    for (const [skew, accepted] of [[8, true], [25, false]]) {
      // oauth4webapi's clockSkew moves the client's clock: its proofs' iat is that far ahead
      // (its assertion's too, within the assertion's own 30 s tolerance).
      const client = { ...fapi(c).client, [oauth.clockSkew]: skew };
      const DPoP = oauth.DPoP(client, { privateKey: keys[c.id].dpop.privateKey, publicKey: keys[c.id].dpop.publicKey });
      const push = withNonceRetry(
        () => oauth.pushedAuthorizationRequest(as, client, auth, params, { DPoP, ...insecure }),
        (res) => oauth.processPushedAuthorizationResponse(as, client, res));
      if (accepted) {
        assert.match((await push).request_uri, /^urn:ietf:params:oauth:request_uri:/, `a proof ${skew} s ahead`);
      } else {
        await assert.rejects(push, (err) => err.error === 'invalid_dpop_proof', `a proof ${skew} s ahead`);
      }
    }
  });

  test('a token request without a DPoP proof, which leaves the code usable', async () => {
    const { client, auth, dpop, redirectURI } = fapi(c);
    const { callback, verifier, nonce } = await authorizeWithPAR(c);
    const res = await oauth.authorizationCodeGrantRequest(as, client, auth, callback, redirectURI, verifier, insecure);
    await assert.rejects(oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: nonce }),
      (err) => err.error === 'invalid_request' && err.status === 400);
    const DPoP = dpop();
    const tokens = await withNonceRetry(
      () => oauth.authorizationCodeGrantRequest(as, client, auth, callback, redirectURI, verifier, { DPoP, ...insecure }),
      (r) => oauth.processAuthorizationCodeResponse(as, client, r, { expectedNonce: nonce, requireIdToken: true }));
    assert.equal(tokens.token_type, 'dpop');
  });

  test('a client secret instead of private_key_jwt', async () => {
    const { client, dpop, redirectURI } = fapi(c);
    const { callback, verifier } = await authorizeWithPAR(c);
    const DPoP = dpop();
    const secret = oauth.ClientSecretPost('a-guessed-secret-0123456789abcdef0123');
    const res = await withNonceRetry(
      () => oauth.authorizationCodeGrantRequest(as, client, secret, callback, redirectURI, verifier, { DPoP, ...insecure }),
      async (r) => r);
    await expectStatus(res.clone(), 401, 'a secret from a private_key_jwt client');
    assert.equal((await res.json()).error, 'invalid_client');
  });
});
