// The FAPI 2.0 side of the load driver: a client that pushes its authorization request (PAR)
// with private_key_jwt and a DPoP proof, lets the user agent of ua.mjs sign in and consent,
// and exchanges the code and refreshes with private_key_jwt and DPoP, retrying once when the
// server asks for a DPoP nonce (RFC 9449 8). Every OAuth message is panva's oauth4webapi's
// (a certified FAPI 2.0 client); the keys are jose's. Nothing here signs or parses a JWT.
//
// The client keys come from a file that fapi-clients.mjs writes (FAPI_CLIENTS), so that both
// servers register the same public keys; each load worker has its own DPoP key.
import { readFileSync } from 'node:fs';

import { importJWK } from 'jose';
import * as oauth from 'oauth4webapi';
import { fetch } from 'undici';

import { runAuthorization, CookieJar } from './ua.mjs';

// readClients reads the file fapi-clients.mjs wrote: [{ client_id, alg, jwk (private) }].
export function readClients(path) {
  return JSON.parse(readFileSync(path, 'utf8')).clients;
}

// FapiClient is one registered FAPI client (one algorithm for its assertions, its DPoP proofs
// and its id_tokens) as the driver's workers use it.
export class FapiClient {
  constructor(as, entry, { redirectUri, username, password, scope, dispatcher }) {
    this.as = as;
    this.alg = entry.alg;
    this.client = { client_id: entry.client_id, id_token_signed_response_alg: entry.alg };
    this.entry = entry;
    this.redirectUri = redirectUri;
    this.username = username;
    this.password = password;
    this.scope = scope;
    this.dispatcher = dispatcher;
    // Plain http on loopback, and the driver's connection pool for every request.
    this.opts = {
      [oauth.allowInsecureRequests]: true,
      [oauth.customFetch]: (url, init) => fetch(url, { ...init, dispatcher }),
    };
    this.nonceRetries = 0;
  }

  // init imports the client's private key; dpopHandle then makes one DPoP key per worker.
  async init() {
    const key = await importJWK(this.entry.jwk, this.alg);
    this.auth = oauth.PrivateKeyJwt({ key, kid: this.entry.jwk.kid });
    return this;
  }

  async dpopHandle() {
    const params = this.alg === 'ES256'
      ? { name: 'ECDSA', namedCurve: 'P-256' }
      : { name: 'RSA-PSS', hash: 'SHA-256', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) };
    const keyPair = await crypto.subtle.generateKey(params, false, ['sign', 'verify']);
    return oauth.DPoP(this.client, keyPair);
  }

  // withNonceRetry sends once more when the server answers use_dpop_nonce: oauth4webapi has
  // cached the nonce from that answer and puts it in the new proof.
  async withNonceRetry(send, process) {
    try {
      return await process(await send());
    } catch (err) {
      if (!oauth.isDPoPNonceError(err)) throw err;
      this.nonceRetries += 1;
      return process(await send());
    }
  }

  // mintCode pushes a request (PAR, private_key_jwt, DPoP binding the code to the worker's
  // key), drives the login and consent with a fresh cookie jar, and returns what the exchange
  // needs.
  async mintCode(DPoP) {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const params = new URLSearchParams({
      redirect_uri: this.redirectUri, response_type: 'code', scope: this.scope, state, nonce,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
      prompt: 'consent', // every flow answers the consent page (no remembered consent)
    });
    const pushed = await this.withNonceRetry(
      () => oauth.pushedAuthorizationRequest(this.as, this.client, this.auth, params, { DPoP, ...this.opts }),
      (res) => oauth.processPushedAuthorizationResponse(this.as, this.client, res),
    );
    const url = new URL(this.as.authorization_endpoint);
    url.search = new URLSearchParams({ client_id: this.client.client_id, request_uri: pushed.request_uri }).toString();
    const { callbackUrl } = await runAuthorization(url.href, {
      redirectUri: this.redirectUri, username: this.username, password: this.password, jar: new CookieJar(), dispatcher: this.dispatcher,
    });
    const callback = oauth.validateAuthResponse(this.as, this.client, callbackUrl, state);
    return { callback, verifier, nonce, DPoP };
  }

  // exchange spends a code; the time is the token request's as the client sees it, a nonce
  // retry included.
  async exchange({ callback, verifier, nonce, DPoP }) {
    const t0 = performance.now();
    const json = await this.withNonceRetry(
      () => oauth.authorizationCodeGrantRequest(this.as, this.client, this.auth, callback, this.redirectUri, verifier, { DPoP, ...this.opts }),
      (res) => oauth.processAuthorizationCodeResponse(this.as, this.client, res, { expectedNonce: nonce, requireIdToken: this.scope.split(' ').includes('openid') }),
    );
    return { json, ms: performance.now() - t0 };
  }

  async refresh(refreshToken, DPoP) {
    const t0 = performance.now();
    const json = await this.withNonceRetry(
      () => oauth.refreshTokenGrantRequest(this.as, this.client, this.auth, refreshToken, { DPoP, ...this.opts }),
      (res) => oauth.processRefreshTokenResponse(this.as, this.client, res),
    );
    return { json, ms: performance.now() - t0 };
  }
}

// discover reads the issuer's metadata with oauth4webapi.
export async function discover(issuer, dispatcher) {
  const opts = { algorithm: 'oidc', [oauth.allowInsecureRequests]: true, [oauth.customFetch]: (url, init) => fetch(url, { ...init, dispatcher }) };
  const url = new URL(issuer);
  return oauth.processDiscoveryResponse(url, await oauth.discoveryRequest(url, opts));
}
