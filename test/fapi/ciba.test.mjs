// OpenID CIBA Core 1.0 with the FAPI-CIBA rules, driven by oauth4webapi's
// backchannelAuthenticationRequest and backchannelAuthenticationGrantRequest, for two fapi2
// clients (private_key_jwt, signed authentication requests, DPoP-bound tokens): one polls, one
// is pinged. The customer's decision comes through the bank's app backend's callback, signed
// by the test's app backend key (lib.mjs appBackend: the one step that decides).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import * as oauth from 'oauth4webapi';

import { USER, appBackend, discover, fapiClient, insecure, keyPair, pingReceiver, startServer, withNonceRetry } from './lib.mjs';

const CIBA = 'urn:openid:params:grant-type:ciba';
const POLL = 'ciba-poll';
const PING = 'ciba-ping';
let server, as, backend, receiver;
const keys = {};

before(async () => {
  for (const id of [POLL, PING]) keys[id] = { auth: await keyPair('ES256'), dpop: await keyPair('ES256') };
  backend = await appBackend();
  receiver = await pingReceiver();
  const client = (id, fields) => fapiClient({
    id, name: id, redirectURI: `https://${id}.example/cb`, scopes: ['openid', 'email'], jwks: { keys: [keys[id].auth.jwk] },
    id_token_signed_response_alg: 'ES256', grant_types: [CIBA], ...fields,
  });
  server = await startServer(() => ({
    clients: [
      client(POLL, { backchannel_token_delivery_mode: 'poll' }),
      client(PING, { backchannel_token_delivery_mode: 'ping', backchannel_client_notification_endpoint: receiver.url }),
    ],
    users: [{ ...USER, email: 'ciba@example.com', email_verified: true }],
  }), { ...backend.env, ...receiver.env });
  as = await discover(server.issuer);
});

after(async () => {
  await server?.stop();
  await receiver?.close();
});

const clientOf = (id) => ({ client_id: id, id_token_signed_response_alg: 'ES256' });
const auth = (id) => oauth.PrivateKeyJwt({ key: keys[id].auth.privateKey, kid: keys[id].auth.jwk.kid });
const dpop = (id) => oauth.DPoP(clientOf(id), { privateKey: keys[id].dpop.privateKey, publicKey: keys[id].dpop.publicKey });

// start sends a signed backchannel authentication request (CIBA Core 7.1.1, FAPI-CIBA) for the
// user, and returns the acknowledgement (auth_req_id, expires_in, interval).
async function start(id, params = {}) {
  const client = clientOf(id);
  const request = await oauth.issueRequestObject(as, client,
    new URLSearchParams({ scope: 'openid email', login_hint: USER.username, binding_message: 'W4T9', ...params }),
    { key: keys[id].auth.privateKey, kid: keys[id].auth.jwk.kid });
  const res = await oauth.backchannelAuthenticationRequest(as, client, auth(id), new URLSearchParams({ request }), insecure);
  return oauth.processBackchannelAuthenticationResponse(as, client, res);
}

// poll is one grant request with the auth_req_id and a DPoP proof; it keeps the response for
// the id_token's signature check.
async function poll(id, authReqID, DPoP = dpop(id)) {
  const client = clientOf(id);
  let response;
  const tokens = await withNonceRetry(
    async () => (response = await oauth.backchannelAuthenticationGrantRequest(as, client, auth(id), authReqID, { DPoP, ...insecure })),
    (res) => oauth.processBackchannelAuthenticationGrantResponse(as, client, res));
  return { tokens, response };
}

// refusedWith asserts the poll is refused with the OAuth error code.
async function refusedWith(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof oauth.ResponseBodyError, `${err}`);
    assert.equal(err.error, code, `${err.error}: ${err.error_description}`);
    assert.equal(err.status, 400);
    return true;
  });
}

// decided posts the user's decision through the app backend and expects it recorded (204).
async function decided(authReqID, approve) {
  const res = await backend.decide(server, authReqID, { approve });
  assert.equal(res.status, 204, await res.clone().text());
}

// tokensOK checks a successful grant response: DPoP-bound tokens for the user, the id_token's
// signature verified against the server's JWKS and its claims validated by oauth4webapi.
async function tokensOK({ tokens, response }) {
  assert.equal(tokens.token_type, 'dpop');
  assert.equal(tokens.scope, 'openid email');
  await oauth.validateApplicationLevelSignature(as, response, insecure);
  const claims = oauth.getValidatedIdTokenClaims(tokens);
  assert.equal(claims.sub, USER.uid);
}

test('discovery advertises the backchannel endpoint, the ciba grant, poll and ping', () => {
  assert.ok(as.backchannel_authentication_endpoint, 'backchannel_authentication_endpoint');
  assert.ok(as.grant_types_supported.includes(CIBA), JSON.stringify(as.grant_types_supported));
  assert.deepEqual([...as.backchannel_token_delivery_modes_supported].sort(), ['ping', 'poll']);
});

describe('poll mode (CIBA Core 7.3, 10.1, 11)', () => {
  test('pending, slow_down when polled faster than the interval, then DPoP-bound tokens once approved; a second poll is invalid_grant', async () => {
    const ack = await start(POLL);
    assert.equal(typeof ack.auth_req_id, 'string');
    assert.ok(ack.expires_in > 0 && ack.interval >= 5, JSON.stringify({ expires_in: ack.expires_in, interval: ack.interval }));
    await refusedWith(poll(POLL, ack.auth_req_id), 'authorization_pending');
    await refusedWith(poll(POLL, ack.auth_req_id), 'slow_down');
    await decided(ack.auth_req_id, true);
    await sleep(ack.interval * 1000);
    const got = await poll(POLL, ack.auth_req_id);
    await tokensOK(got);
    await refusedWith(poll(POLL, ack.auth_req_id), 'invalid_grant');
  });

  test('a denial is access_denied', async () => {
    const ack = await start(POLL);
    await decided(ack.auth_req_id, false);
    await refusedWith(poll(POLL, ack.auth_req_id), 'access_denied');
  });

  test('an undecided request past requested_expiry is expired_token', async () => {
    const ack = await start(POLL, { requested_expiry: '1' });
    assert.equal(ack.expires_in, 1);
    await sleep(1500);
    await refusedWith(poll(POLL, ack.auth_req_id), 'expired_token');
  });

  test('another client cannot poll the request', async () => {
    const ack = await start(POLL);
    await decided(ack.auth_req_id, true);
    await refusedWith(poll(PING, ack.auth_req_id), 'invalid_grant');
    await tokensOK(await poll(POLL, ack.auth_req_id));
  });
});

describe('ping mode (CIBA Core 10.2)', () => {
  test('the decision pings the client\'s endpoint with its bearer token and the auth_req_id; then the grant request gets tokens', async () => {
    const token = oauth.generateRandomState();
    const ack = await start(PING, { client_notification_token: token });
    assert.equal(receiver.count(), 0, 'pinged before the decision');
    await decided(ack.auth_req_id, true);
    const ping = await Promise.race([receiver.next(), sleep(10_000).then(() => { throw new Error('no ping within 10 s'); })]);
    assert.equal(ping.method, 'POST');
    assert.equal(ping.url, '/ciba/notify');
    assert.equal(ping.headers.authorization, `Bearer ${token}`);
    assert.match(ping.headers['content-type'], /^application\/json/);
    assert.deepEqual(JSON.parse(ping.body), { auth_req_id: ack.auth_req_id });
    await tokensOK(await poll(PING, ack.auth_req_id));
  });

  test('a denial pings too, and the grant request is access_denied', async () => {
    const token = oauth.generateRandomState();
    const ack = await start(PING, { client_notification_token: token });
    await decided(ack.auth_req_id, false);
    const ping = await Promise.race([receiver.next(), sleep(10_000).then(() => { throw new Error('no ping within 10 s'); })]);
    assert.deepEqual(JSON.parse(ping.body), { auth_req_id: ack.auth_req_id });
    await refusedWith(poll(PING, ack.auth_req_id), 'access_denied');
  });
});
