// Rich authorization requests (RFC 9396) driven by oauth4webapi: a fapi2 client registered for
// payment_initiation and account_information pushes authorization_details (as a form parameter,
// and inside a signed request object), the user signs in and consents, and the DPoP code
// exchange's token response carries the details (RFC 9396 7); introspection shows them (9.1); a
// refresh narrows them (7.2) and one that widens them is refused; a payment grant gets no refresh
// token and its DPoP-bound token is accepted once by the bank API. Then what the PAR endpoint
// refuses: details that are not an array, of an unknown type, that break their schema, of a type
// the client is not registered for.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { Browser, discover, fapiClient, insecure, keyPair, Passkey, PASSKEYS_ON, startServer, USER, withNonceRetry } from './lib.mjs';

const CLIENT_ID = 'fapi-rar';
const ACCOUNTS_ONLY = 'fapi-rar-accounts';
let server, as, keys, passkey;

// The RFC 9396 section 2 examples, as a bank's third party would send them.
const PAYMENT = {
  type: 'payment_initiation',
  locations: ['https://api.acmebank.example/payments'],
  instructedAmount: { currency: 'EUR', amount: '123.50' },
  creditorName: 'Merchant A',
  creditorAccount: { iban: 'DE02100100109307118603' },
  remittanceInformationUnstructured: 'Ref Number Merchant',
};
const ACCOUNTS = {
  type: 'account_information',
  accounts: [{ iban: 'DE02100100109307118603' }],
  permissions: ['balances', 'transactions'],
  expirationDate: '2027-01-31',
};

before(async () => {
  keys = { auth: await keyPair('ES256'), dpop: await keyPair('ES256') };
  server = await startServer((base) => ({
    clients: [
      fapiClient({
        id: CLIENT_ID, name: 'FAPI RAR App', redirectURI: `${base}/${CLIENT_ID}/callback`,
        jwks: { keys: [keys.auth.jwk] }, id_token_signed_response_alg: 'ES256',
        authorization_details_types: ['payment_initiation', 'account_information'],
      }),
      fapiClient({
        id: ACCOUNTS_ONLY, name: 'FAPI AIS App', redirectURI: `${base}/${ACCOUNTS_ONLY}/callback`,
        jwks: { keys: [keys.auth.jwk] }, id_token_signed_response_alg: 'ES256', authorization_details_types: ['account_information'],
      }),
    ],
    users: [{ ...USER, email: 'fapi@example.com', email_verified: true }],
  }), PASSKEYS_ON);
  as = await discover(server.issuer);
  // The user's passkey: a payment is confirmed with it (dynamic linking), added on the first.
  passkey = new Passkey('localhost', server.base);
});

after(async () => { await server?.stop(); });

const clientOf = (id) => ({ client_id: id, id_token_signed_response_alg: 'ES256' });
const auth = () => oauth.PrivateKeyJwt({ key: keys.auth.privateKey, kid: keys.auth.jwk.kid });
const dpop = (id) => oauth.DPoP(clientOf(id), { privateKey: keys.dpop.privateKey, publicKey: keys.dpop.publicKey });
const redirectURI = (id) => `${server.base}/${id}/callback`;

async function requestParams(id, details) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const params = new URLSearchParams({
    redirect_uri: redirectURI(id), response_type: 'code', scope: 'openid', state,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    authorization_details: JSON.stringify(details),
  });
  return { params, verifier, state };
}

function push(id, body, DPoP) {
  return withNonceRetry(
    () => oauth.pushedAuthorizationRequest(as, clientOf(id), auth(), body, { DPoP, ...insecure }),
    (res) => oauth.processPushedAuthorizationResponse(as, clientOf(id), res));
}

// flow pushes body, signs in and consents, and exchanges the code with DPoP.
async function flow(body, verifier, state, DPoP) {
  const client = clientOf(CLIENT_ID);
  const pushed = await push(CLIENT_ID, body, DPoP);
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({ client_id: CLIENT_ID, request_uri: pushed.request_uri });
  const callback = oauth.validateAuthResponse(as, client, await new Browser().authorize(url, USER, passkey), state);
  return withNonceRetry(
    () => oauth.authorizationCodeGrantRequest(as, client, auth(), callback, redirectURI(CLIENT_ID), verifier, { DPoP, ...insecure }),
    (res) => oauth.processAuthorizationCodeResponse(as, client, res));
}

async function introspect(token) {
  const client = clientOf(CLIENT_ID);
  const res = await oauth.introspectionRequest(as, client, auth(), token, insecure);
  return oauth.processIntrospectionResponse(as, client, res);
}

test('discovery lists the authorization_details types', () => {
  assert.deepEqual(as.authorization_details_types_supported, ['account_information', 'payment_initiation']);
});

test('pushed authorization_details reach the token response and introspection; a refresh narrows them and may not widen them', async () => {
  // A grant that holds a payment is one-time: its details reach the token response and
  // introspection, and it gets no refresh token (docs/api.md, "Payment tokens are one-time").
  const payment = await requestParams(CLIENT_ID, [PAYMENT, ACCOUNTS]);
  const paid = await flow(payment.params, payment.verifier, payment.state, dpop(CLIENT_ID));
  assert.deepEqual(paid.authorization_details, [PAYMENT, ACCOUNTS]);
  assert.deepEqual((await introspect(paid.access_token)).authorization_details, [PAYMENT, ACCOUNTS]);
  assert.equal(paid.refresh_token, undefined);

  const { params, verifier, state } = await requestParams(CLIENT_ID, [ACCOUNTS]);
  const DPoP = dpop(CLIENT_ID);
  const tokens = await flow(params, verifier, state, DPoP);
  assert.deepEqual(tokens.authorization_details, [ACCOUNTS]);
  assert.deepEqual((await introspect(tokens.access_token)).authorization_details, [ACCOUNTS]);

  const narrower = { ...ACCOUNTS, permissions: ['balances'] };
  const refresh = (details) => withNonceRetry(
    () => oauth.refreshTokenGrantRequest(as, clientOf(CLIENT_ID), auth(), tokens.refresh_token,
      { DPoP, additionalParameters: { authorization_details: JSON.stringify(details) }, ...insecure }),
    (res) => oauth.processRefreshTokenResponse(as, clientOf(CLIENT_ID), res));
  const refreshed = await refresh([narrower]);
  assert.deepEqual(refreshed.authorization_details, [narrower]);
  assert.deepEqual((await introspect(refreshed.access_token)).authorization_details, [narrower]);

  for (const [what, details] of [
    ['another permission', [{ ...ACCOUNTS, permissions: ['balances', 'details'] }]],
    ['a changed amount', [{ ...PAYMENT, instructedAmount: { currency: 'EUR', amount: '999.00' } }]],
  ]) {
    await assert.rejects(refresh(details), (err) => {
      assert.ok(err instanceof oauth.ResponseBodyError, `${what}: ${err}`);
      assert.equal(err.status, 400, what);
      assert.equal(err.error, 'invalid_authorization_details', `${what}: ${err.error_description}`);
      return true;
    });
  }
  // The refusals changed nothing: the refresh token still gets the grant's details.
  const again = await withNonceRetry(
    () => oauth.refreshTokenGrantRequest(as, clientOf(CLIENT_ID), auth(), tokens.refresh_token, { DPoP, ...insecure }),
    (res) => oauth.processRefreshTokenResponse(as, clientOf(CLIENT_ID), res));
  assert.deepEqual(again.authorization_details, [ACCOUNTS]);
});

test('a payment token is accepted once by the bank API, which receives the details; 50 racing calls: one passes', async () => {
  // A refusal comes as a WWW-Authenticate challenge, which oauth4webapi throws: its error is
  // the RFC 6750 code.
  const call = async (token, DPoP) => {
    try {
      const res = await oauth.protectedResourceRequest(token, 'GET', new URL(`${server.base}/v2/bank/accounts`), undefined, undefined, { DPoP, ...insecure });
      return { status: res.status, body: res.status === 200 ? await res.json() : undefined };
    } catch (err) {
      if (!(err instanceof oauth.WWWAuthenticateChallengeError)) throw err;
      assert.equal(err.cause[0].parameters.error, 'invalid_token');
      return { status: err.status };
    }
  };
  const pay = async () => {
    const { params, verifier, state } = await requestParams(CLIENT_ID, [PAYMENT]);
    const DPoP = dpop(CLIENT_ID);
    return { tokens: await flow(params, verifier, state, DPoP), DPoP };
  };
  const { tokens, DPoP } = await pay();
  assert.equal(tokens.refresh_token, undefined);
  assert.equal(tokens.expires_in, 300);
  const first = await call(tokens.access_token, DPoP);
  assert.equal(first.status, 200);
  // No upstream is configured: the local server answers what the backend would receive.
  assert.deepEqual(JSON.parse(Buffer.from(first.body.payment, 'base64url').toString()), [PAYMENT]);
  assert.equal((await call(tokens.access_token, DPoP)).status, 401);

  const raced = await pay();
  const statuses = await Promise.all(Array.from({ length: 50 }, () => call(raced.tokens.access_token, raced.DPoP).then((r) => r.status)));
  assert.equal(statuses.filter((s) => s === 200).length, 1, `statuses ${statuses}`);
  assert.equal(statuses.filter((s) => s === 401).length, 49, `statuses ${statuses}`);
});

test('authorization_details inside a signed request object (issueRequestObject) reach the token response', async () => {
  const { params, verifier, state } = await requestParams(CLIENT_ID, [PAYMENT]);
  const request = await oauth.issueRequestObject(as, clientOf(CLIENT_ID), params, { key: keys.auth.privateKey, kid: keys.auth.jwk.kid });
  const claims = JSON.parse(Buffer.from(request.split('.')[1], 'base64url'));
  assert.deepEqual(claims.authorization_details, [PAYMENT], 'the object carries the details as JSON');
  const tokens = await flow(new URLSearchParams({ request }), verifier, state, dpop(CLIENT_ID));
  assert.deepEqual(tokens.authorization_details, [PAYMENT]);
});

test('the PAR endpoint refuses bad authorization_details with invalid_authorization_details', async () => {
  const cases = [
    ['an object, not an array', CLIENT_ID, JSON.stringify(PAYMENT)],
    ['an unknown type', CLIENT_ID, JSON.stringify([{ type: 'openid_credential' }])],
    ['a schema violation (amount as a number)', CLIENT_ID, JSON.stringify([{ ...PAYMENT, instructedAmount: { currency: 'EUR', amount: 123.5 } }])],
    ['a type the client is not registered for', ACCOUNTS_ONLY, JSON.stringify([PAYMENT])],
  ];
  for (const [what, id, details] of cases) {
    const { params } = await requestParams(id, []);
    params.set('authorization_details', details);
    await assert.rejects(push(id, params, dpop(id)), (err) => {
      assert.ok(err instanceof oauth.ResponseBodyError, `${what}: ${err}`);
      assert.equal(err.status, 400, what);
      assert.equal(err.error, 'invalid_authorization_details', `${what}: ${err.error_description}`);
      return true;
    });
  }
});
