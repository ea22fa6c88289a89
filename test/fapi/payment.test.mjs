// Payments and consent the PSD2 way (issue 29), end to end with oauth4webapi as the third
// party: a fapi2 client pushes a payment (authorization_details payment_initiation, scope
// bank:transfers:write), the customer signs in with the strong step (password, then the
// authenticator app's code) and allows, the DPoP code exchange gives a one-time token with no
// refresh token, the bank API accepts it once (the backend receives the details) and refuses it
// after; an account_information grant is refreshed with its details kept and then narrowed; a
// withdrawal (RFC 7009 revocation by the client) is seen by the bank API's authorizer at once.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';

import { parse } from 'node-html-parser';
import * as oauth from 'oauth4webapi';

import { Browser, ceremonyOptions, Passkey, PASSKEYS_ON, discover, expectStatus, fapiClient, insecure, keyPair, startServer, USER, withNonceRetry } from './lib.mjs';

const CLIENT_ID = 'fapi-pay';
const SCOPE = 'openid bank:transfers:write';
// One customer per strong sign-in: each sets up an authenticator app on their first sign-in,
// so no test waits for a new time step of a code already used.
const CUSTOMERS = ['pay', 'ais', 'withdraw-ais', 'withdraw-pay'].map((name, i) => ({
  ...USER, uid: `fapi-pay-uid-${i}`, username: `fapi-pay-${name}`,
}));
const customer = (name) => CUSTOMERS.find((c) => c.username === `fapi-pay-${name}`);

const PAYMENT = {
  type: 'payment_initiation',
  instructedAmount: { currency: 'EUR', amount: '250.00' },
  creditorName: 'Merchant B',
  creditorAccount: { iban: 'FR1420041010050500013M02606' },
  remittanceInformationUnstructured: 'Invoice 2026-117',
};
const ACCOUNTS = {
  type: 'account_information',
  accounts: [{ iban: 'DE02100100109307118603' }],
  permissions: ['balances', 'transactions'],
  expirationDate: '2027-01-31',
};

let server, as, keys;

before(async () => {
  keys = { auth: await keyPair('ES256'), dpop: await keyPair('ES256') };
  server = await startServer((base) => ({
    clients: [fapiClient({
      id: CLIENT_ID, name: 'FAPI Payments App', redirectURI: `${base}/${CLIENT_ID}/callback`,
      scopes: ['openid', 'bank:transfers:write'],
      jwks: { keys: [keys.auth.jwk] }, id_token_signed_response_alg: 'ES256',
      authorization_details_types: ['payment_initiation', 'account_information'],
    })],
    users: CUSTOMERS,
  }), PASSKEYS_ON);
  as = await discover(server.issuer);
});

after(async () => { await server?.stop(); });

const client = { client_id: CLIENT_ID, id_token_signed_response_alg: 'ES256' };
const auth = () => oauth.PrivateKeyJwt({ key: keys.auth.privateKey, kid: keys.auth.jwk.kid });
const newDPoP = () => oauth.DPoP(client, { privateKey: keys.dpop.privateKey, publicKey: keys.dpop.publicKey });
const redirectURI = () => `${server.base}/${CLIENT_ID}/callback`;

// totp is the authenticator app (RFC 6238: HMAC-SHA-1, 30-second steps, 6 digits) for the
// base32 key our set-up page shows.
function totp(base32, now = Date.now()) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const ch of base32.replace(/[\s=]/g, '')) bits += alphabet.indexOf(ch).toString(2).padStart(5, '0');
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(now / 1000 / 30)));
  const mac = createHmac('sha1', key).update(counter).digest();
  const offset = mac[mac.length - 1] & 0xf;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

// passkeys are the customers' passkeys (software authenticators), one each, added on their
// first payment.
const passkeys = new Map();
const passkeyOf = (user) => {
  if (!passkeys.has(user.username)) passkeys.set(user.username, new Passkey('localhost', server.base));
  return passkeys.get(user.username);
};

// signInStrongAndAllow is the customer's whole part of a payment or an account-information
// consent, in one place: the login page, the password, the strong step (a customer with no
// second factor sets up the authenticator app and enters its code, then passes the recovery
// codes), then Allow on the consent page, or, for a payment, its confirmation with the
// customer's passkey over the details (dynamic linking: the passkey is added first when the
// customer has none). The page must show the payment. It returns the URL our server sent the
// browser to and the consent (or payment) page.
async function signInStrongAndAllow(url, user) {
  const browser = new Browser();
  let res = await browser.fetch(url);
  await expectStatus(res, 200, 'the login page');
  res = await browser.submit(url, await res.text(), { username: user.username, password: user.password });
  await expectStatus(res, 200, 'the authenticator set-up page');
  let html = await res.text();
  const secret = parse(html).querySelector('#totp-secret')?.text;
  assert.ok(secret, `the payment scope asks for the strong step: want the set-up page, got\n${html.slice(0, 400)}`);
  res = await browser.submit(url, html, { code: totp(secret) });
  await expectStatus(res, 200, 'the recovery codes');
  res = await browser.submit(url, await res.text(), {});
  await expectStatus(res, 200, 'the consent page');
  html = await res.text();
  const consent = html;
  if (html.includes('id="payment-nofactor"') || html.includes('value="payment_passkey"')) {
    const passkey = passkeyOf(user);
    if (!html.includes('value="payment_passkey"')) {
      res = await browser.submit(url, html, { action: 'passkey_offer' });
      await expectStatus(res, 200, 'the page that adds a passkey');
      html = await res.text();
      res = await browser.submit(url, html, { action: 'passkey_register', credential: passkey.create(ceremonyOptions(html)) });
      await expectStatus(res, 200, 'the payment page with the passkey');
      html = await res.text();
    }
    res = await browser.submit(url, html, { action: 'payment_passkey', credential: passkey.get(ceremonyOptions(html)) });
    await expectStatus(res, 303, "the redirect after the payment's confirmation");
    return { location: new URL(res.headers.get('location')), consent };
  }
  res = await browser.submit(url, html, { decision: 'allow' });
  await expectStatus(res, 303, 'the redirect after consent');
  return { location: new URL(res.headers.get('location')), consent };
}

// authorize pushes details for SCOPE, has user sign in and allow, and exchanges the code with
// a DPoP key.
async function authorize(details, user) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const params = new URLSearchParams({
    redirect_uri: redirectURI(), response_type: 'code', scope: SCOPE, state,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    authorization_details: JSON.stringify(details),
  });
  const DPoP = newDPoP();
  const pushed = await withNonceRetry(
    () => oauth.pushedAuthorizationRequest(as, client, auth(), params, { DPoP, ...insecure }),
    (res) => oauth.processPushedAuthorizationResponse(as, client, res));
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({ client_id: CLIENT_ID, request_uri: pushed.request_uri });
  const { location, consent } = await signInStrongAndAllow(url, user);
  const callback = oauth.validateAuthResponse(as, client, location, state);
  const tokens = await withNonceRetry(
    () => oauth.authorizationCodeGrantRequest(as, client, auth(), callback, redirectURI(), verifier, { DPoP, ...insecure }),
    (res) => oauth.processAuthorizationCodeResponse(as, client, res));
  return { tokens, DPoP, consent };
}

// bankAPI calls the bank API with a DPoP-bound token; a refusal is oauth4webapi's
// WWW-Authenticate challenge error, whose RFC 6750 code must be invalid_token.
async function bankAPI(token, DPoP) {
  try {
    const res = await oauth.protectedResourceRequest(token, 'GET', new URL(`${server.base}/v2/bank/accounts`), undefined, undefined, { DPoP, ...insecure });
    return { status: res.status, body: res.status === 200 ? await res.json() : undefined };
  } catch (err) {
    if (!(err instanceof oauth.WWWAuthenticateChallengeError)) throw err;
    assert.equal(err.cause[0].parameters.error, 'invalid_token');
    return { status: err.status };
  }
}

const refresh = (refreshToken, DPoP, details) => withNonceRetry(
  () => oauth.refreshTokenGrantRequest(as, client, auth(), refreshToken,
    { DPoP, ...(details && { additionalParameters: { authorization_details: JSON.stringify(details) } }), ...insecure }),
  (res) => oauth.processRefreshTokenResponse(as, client, res));

async function revoke(token) {
  const res = await oauth.revocationRequest(as, client, auth(), token, insecure);
  await oauth.processRevocationResponse(res);
}

test('a payment from PAR through the strong sign-in to one bank API call; the second use of its token is refused', async () => {
  const { tokens, DPoP, consent } = await authorize([PAYMENT], customer('pay'));
  const page = parse(consent).text;
  for (const shown of ['250', 'Merchant B', 'Invoice 2026-117']) assert.ok(page.includes(shown), `the consent page shows ${shown}`);
  assert.ok(!page.includes('FR1420041010050500013M02606'), 'the consent page masks the payee account');

  assert.equal(tokens.token_type.toLowerCase(), 'dpop');
  assert.equal(tokens.refresh_token, undefined, 'a payment grant is one-time: no refresh token');
  assert.equal(tokens.expires_in, 300);
  assert.deepEqual(tokens.authorization_details, [PAYMENT]);
  assert.equal(oauth.getValidatedIdTokenClaims(tokens).acr, 'urn:acmebank:acr:sca', 'the sign-in was strong');

  const first = await bankAPI(tokens.access_token, DPoP);
  assert.equal(first.status, 200);
  // No upstream is configured: the local server answers what the bank backend would receive.
  assert.deepEqual(JSON.parse(Buffer.from(first.body.payment, 'base64url').toString()), [PAYMENT]);
  assert.equal((await bankAPI(tokens.access_token, DPoP)).status, 401, 'the second use of a payment token');
});

test('an account_information grant refreshes with its details kept, then narrowed', async () => {
  const { tokens, DPoP } = await authorize([ACCOUNTS], customer('ais'));
  assert.ok(tokens.refresh_token, 'an account_information grant gets a refresh token');
  assert.deepEqual(tokens.authorization_details, [ACCOUNTS]);

  const kept = await refresh(tokens.refresh_token, DPoP);
  assert.deepEqual(kept.authorization_details, [ACCOUNTS], 'a refresh without details keeps the grant\'s');
  const narrower = { ...ACCOUNTS, permissions: ['balances'] };
  const narrowed = await refresh(kept.refresh_token, DPoP, [narrower]);
  assert.deepEqual(narrowed.authorization_details, [narrower]);
  // The narrowing is the access token's: the grant keeps what the customer granted.
  const again = await refresh(narrowed.refresh_token, DPoP);
  assert.deepEqual(again.authorization_details, [ACCOUNTS]);
  // The account information token is not one-time.
  assert.equal((await bankAPI(again.access_token, DPoP)).status, 200);
  assert.equal((await bankAPI(again.access_token, DPoP)).status, 200);
});

test('a withdrawal is seen by the bank API at once: the grant\'s tokens are refused on the next call', async () => {
  // An account-information grant withdrawn by revoking its refresh token (RFC 7009): the
  // access token that worked a moment before is refused.
  const ais = await authorize([ACCOUNTS], customer('withdraw-ais'));
  assert.equal((await bankAPI(ais.tokens.access_token, ais.DPoP)).status, 200);
  await revoke(ais.tokens.refresh_token);
  assert.equal((await bankAPI(ais.tokens.access_token, ais.DPoP)).status, 401, 'the access token after the withdrawal');
  await assert.rejects(refresh(ais.tokens.refresh_token, ais.DPoP), (err) => {
    assert.equal(err.error, 'invalid_grant');
    return true;
  });

  // A payment withdrawn before its use: its token never reaches the bank backend.
  const pay = await authorize([PAYMENT], customer('withdraw-pay'));
  await revoke(pay.tokens.access_token);
  assert.equal((await bankAPI(pay.tokens.access_token, pay.DPoP)).status, 401, 'a withdrawn payment token');
});
