// The seed's kind of client, untouched by FAPI: a client secret (HTTP Basic), a plain
// authorization request with PKCE, Bearer tokens and an RS256 id_token, driven by oauth4webapi.
// It proves the clients registered before FAPI keep working as documented, next to the FAPI ones.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { Browser, discover, insecure, startServer, USER } from './lib.mjs';

const SECRET = 'plain-secret-0123456789abcdef0123456789';
let server, as, redirectURI;
const client = { client_id: 'plain-client' };

before(async () => {
  server = await startServer((base) => {
    redirectURI = `${base}/plain/callback`;
    return {
      clients: [{ client_id: client.client_id, client_secret: SECRET, name: 'Plain App', redirect_uris: [redirectURI], scopes: ['openid', 'email', 'profile'] }],
      users: [{ ...USER, email: 'fapi@example.com', email_verified: true, name: 'Fay Api' }],
    };
  });
  as = await discover(server.issuer);
});

after(async () => { await server?.stop(); });

test('a secret client signs in with PKCE, gets Bearer tokens and an RS256 id_token, refreshes and revokes', async () => {
  const auth = oauth.ClientSecretBasic(SECRET);
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: client.client_id, redirect_uri: redirectURI, response_type: 'code', scope: 'openid email', state, nonce,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
  });
  const callback = await new Browser().authorize(url);
  const params = oauth.validateAuthResponse(as, client, callback, state);

  const res = await oauth.authorizationCodeGrantRequest(as, client, auth, params, redirectURI, verifier, insecure);
  const tokens = await oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: nonce, requireIdToken: true });
  await oauth.validateApplicationLevelSignature(as, res, insecure);
  assert.equal(tokens.token_type, 'bearer');
  const claims = oauth.getValidatedIdTokenClaims(tokens);
  assert.equal(claims.sub, USER.uid);
  assert.equal(JSON.parse(Buffer.from(tokens.id_token.split('.')[0], 'base64url')).alg, 'RS256');

  const info = await oauth.processUserInfoResponse(as, client, claims.sub,
    await oauth.userInfoRequest(as, client, tokens.access_token, insecure));
  assert.equal(info.email, 'fapi@example.com');

  const refreshed = await oauth.processRefreshTokenResponse(as, client,
    await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token, insecure));
  assert.notEqual(refreshed.refresh_token, tokens.refresh_token, 'the refresh token rotates');

  await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, refreshed.refresh_token, insecure));
  const gone = await oauth.userInfoRequest(as, client, refreshed.access_token, insecure);
  assert.equal(gone.status, 401, 'revoking the refresh token ends its access token at once');
});
