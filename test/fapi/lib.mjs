// Shared by the flows: the local server under test, a browser (cookie jar and HTML forms) that
// signs in and consents on our pages, and the client keys. The OAuth side of every flow is
// oauth4webapi's; nothing here speaks OAuth.
import { spawn } from 'node:child_process';
import { createHash, createSign, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { parse } from 'node-html-parser';
import * as oauth from 'oauth4webapi';
import { CookieJar } from 'tough-cookie';

// The local server speaks plain http on loopback: oauth4webapi refuses that unless told.
export const insecure = { [oauth.allowInsecureRequests]: true };

export const ISSUER_PATH = '/v2/authentication/oauth2';

export const USER = { uid: 'fapi-uid-0001', username: 'fapi-user', password: 'fapi-password-0123456789' };

// freePort asks the kernel for a free loopback port. The server binds it a moment later; the
// window is the same one test/abuse/run.sh accepts.
async function freePort() {
  const srv = createServer();
  await new Promise((resolve, reject) => srv.listen(0, '127.0.0.1', resolve).on('error', reject));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

// startServer runs the authserver binary named by $AUTHSERVER (test/fapi/run.sh builds it) on a
// free port with a fresh data directory and the seed seedFor(base) returns (redirect URIs name
// the port), and waits for discovery. stop() ends it and removes the directory. env adds
// AUTH_* settings.
export async function startServer(seedFor, env = {}) {
  const bin = process.env.AUTHSERVER;
  if (!bin) throw new Error('AUTHSERVER is not set: run test/fapi/run.sh, which builds the server');
  const dir = await mkdtemp(join(tmpdir(), 'fapi-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  await writeFile(join(dir, 'seed.json'), JSON.stringify(seedFor(base)), { mode: 0o600 });
  const log = [];
  const child = spawn(bin, ['--addr', `127.0.0.1:${port}`, '--data', join(dir, 'data'), '--seed', join(dir, 'seed.json')], {
    // The suite drives many flows from 127.0.0.1 within a second: the per-address rate limits
    // (tested in Go: shared/httpapi ratelimit_test.go, test/e2e abuse tests) would answer 429.
    env: { ...process.env, AUTH_LOG_LEVEL: 'warn', AUTH_RATE_LIMIT: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (b) => log.push(b.toString()));
  child.stderr.on('data', (b) => log.push(b.toString()));
  let exited = null;
  child.on('exit', (code) => { exited = code; });
  const issuer = new URL(base + ISSUER_PATH);
  for (let i = 0; ; i++) {
    if (exited !== null) throw new Error(`authserver exited with ${exited} before it answered:\n${log.join('')}`);
    try {
      const r = await fetch(new URL(ISSUER_PATH + '/.well-known/openid-configuration', base));
      if (r.ok) break;
    } catch { /* not listening yet */ }
    if (i > 200) throw new Error(`authserver did not answer within 20 s:\n${log.join('')}`);
    await sleep(100);
  }
  return {
    base,
    issuer,
    log: () => log.join(''),
    async stop() {
      if (exited === null) {
        const done = new Promise((resolve) => child.on('exit', resolve));
        child.kill('SIGTERM');
        await done;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

// discover reads the server's OpenID configuration with oauth4webapi.
export async function discover(issuer) {
  const res = await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...insecure });
  return oauth.processDiscoveryResponse(issuer, res);
}

// Browser is what a user agent does on our pages: it keeps cookies, follows no redirect by
// itself (the redirect to the client is the result), and posts the forms the pages render.
export class Browser {
  jar = new CookieJar();

  async fetch(url, init = {}) {
    const headers = new Headers(init.headers);
    const cookie = await this.jar.getCookieString(String(url));
    if (cookie) headers.set('cookie', cookie);
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) await this.jar.setCookie(c, String(url));
    return res;
  }

  // submit posts the page's form: its hidden inputs, then fields (a button's name and value
  // among them, as a browser adds the one pressed).
  async submit(pageURL, html, fields) {
    const form = parse(html).querySelector('form');
    if (!form) throw new Error(`no form on the page:\n${html.slice(0, 500)}`);
    const body = new URLSearchParams();
    for (const input of form.querySelectorAll('input[type=hidden]')) body.set(input.getAttribute('name'), input.getAttribute('value') ?? '');
    for (const [k, v] of Object.entries(fields)) body.set(k, v);
    return this.fetch(new URL(form.getAttribute('action'), pageURL), {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
  }

  // authorize opens an authorization URL, signs in as user, presses Allow, and returns the
  // URL our server sent the browser to (the client's redirect URI with code, state and iss).
  // A payment's page has no Allow: the payment is confirmed with passkey (dynamic linking),
  // added first when the user has none; the server must run with passkeys on (PASSKEYS_ON).
  async authorize(url, user = USER, passkey = null) {
    let res = await this.fetch(url);
    await expectStatus(res, 200, 'the login page');
    res = await this.submit(url, await res.text(), { username: user.username, password: user.password });
    // A consent the user gave before (an earlier test's grant covers the request) is
    // remembered: the sign-in itself sends the browser back to the client.
    if (res.status === 303) return new URL(res.headers.get('location'));
    await expectStatus(res, 200, 'the consent page');
    let html = await res.text();
    if (!html.includes('id="payment-nofactor"') && !html.includes('value="payment_passkey"')) {
      res = await this.submit(url, html, { decision: 'allow' });
      await expectStatus(res, 303, 'the redirect after consent');
      return new URL(res.headers.get('location'));
    }
    if (!passkey) throw new Error('a payment page: confirming it needs a passkey');
    if (!html.includes('value="payment_passkey"')) {
      res = await this.submit(url, html, { action: 'passkey_offer' });
      await expectStatus(res, 200, 'the page that adds a passkey');
      html = await res.text();
      res = await this.submit(url, html, { action: 'passkey_register', credential: passkey.create(ceremonyOptions(html)) });
      await expectStatus(res, 200, 'the payment page with the passkey');
      html = await res.text();
    }
    res = await this.submit(url, html, { action: 'payment_passkey', credential: passkey.get(ceremonyOptions(html)) });
    await expectStatus(res, 303, 'the redirect after the payment\'s confirmation');
    return new URL(res.headers.get('location'));
  }
}

// PASSKEYS_ON are the settings a server needs for passkeys on its loopback address: the
// relying party's id (127.0.0.1 cannot be one).
export const PASSKEYS_ON = { AUTH_PASSKEY_RP_ID: 'localhost' };

// ceremonyOptions reads the WebAuthn options (publicKey) of a page's passkey form.
export function ceremonyOptions(html) {
  const form = parse(html).querySelector('form[data-passkey]');
  if (!form) throw new Error(`no passkey form on the page:\n${html.slice(0, 500)}`);
  return JSON.parse(form.getAttribute('data-options')).publicKey;
}

// cbor encodes the few CBOR items a WebAuthn attestation needs (RFC 8949: integers, byte and
// text strings, maps), for the software passkey below; the server decodes with go-webauthn.
function cbor(v) {
  const head = (major, n) => {
    if (n < 24) return Buffer.from([(major << 5) | n]);
    if (n < 256) return Buffer.from([(major << 5) | 24, n]);
    if (n < 65536) return Buffer.from([(major << 5) | 25, n >> 8, n & 255]);
    throw new Error('cbor: length too large for this encoder');
  };
  if (typeof v === 'number') return v >= 0 ? head(0, v) : head(1, -1 - v);
  if (typeof v === 'string') return Buffer.concat([head(3, Buffer.byteLength(v)), Buffer.from(v)]);
  if (Buffer.isBuffer(v)) return Buffer.concat([head(2, v.length), v]);
  if (v instanceof Map) return Buffer.concat([head(5, v.size), ...[...v].flatMap(([k, x]) => [cbor(k), cbor(x)])]);
  throw new Error(`cbor: cannot encode ${typeof v}`);
}

// Passkey is a WebAuthn platform authenticator in software (ES256, user verification, a
// counter) for a relying party and origin: it answers the options our pages carry as a
// browser would, and go-webauthn checks its answers as it checks a real one's.
export class Passkey {
  #key = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  #id = randomBytes(16);
  #count = 0;
  #handle = null;

  constructor(rpID, origin) {
    this.rpID = rpID;
    this.origin = origin;
  }

  #authData(attested) {
    const rp = createHash('sha256').update(this.rpID).digest();
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(this.#count);
    return Buffer.concat([rp, Buffer.from([0x01 | 0x04 | (attested ? 0x40 : 0)]), counter, attested ?? Buffer.alloc(0)]);
  }

  #clientData(type, challenge) {
    return Buffer.from(JSON.stringify({ type, challenge, origin: this.origin, crossOrigin: false }));
  }

  create(options) {
    this.#handle = options.user.id;
    const jwk = this.#key.publicKey.export({ format: 'jwk' });
    const cose = cbor(new Map([[1, 2], [3, -7], [-1, 1], [-2, Buffer.from(jwk.x, 'base64url')], [-3, Buffer.from(jwk.y, 'base64url')]]));
    const idLen = Buffer.alloc(2);
    idLen.writeUInt16BE(this.#id.length);
    const attested = Buffer.concat([Buffer.alloc(16), idLen, this.#id, cose]);
    const attestation = cbor(new Map([['fmt', 'none'], ['attStmt', new Map()], ['authData', this.#authData(attested)]]));
    return JSON.stringify({
      id: this.#id.toString('base64url'), rawId: this.#id.toString('base64url'), type: 'public-key',
      response: { clientDataJSON: this.#clientData('webauthn.create', options.challenge).toString('base64url'),
        attestationObject: attestation.toString('base64url'), transports: ['internal'] },
      authenticatorAttachment: 'platform', clientExtensionResults: {},
    });
  }

  get(options) {
    this.#count++;
    const clientData = this.#clientData('webauthn.get', options.challenge);
    const authData = this.#authData(null);
    const signature = createSign('sha256').update(Buffer.concat([authData, createHash('sha256').update(clientData).digest()]))
      .sign({ key: this.#key.privateKey, dsaEncoding: 'der' });
    return JSON.stringify({
      id: this.#id.toString('base64url'), rawId: this.#id.toString('base64url'), type: 'public-key',
      response: { clientDataJSON: clientData.toString('base64url'), authenticatorData: authData.toString('base64url'),
        signature: signature.toString('base64url'), userHandle: this.#handle },
      authenticatorAttachment: 'platform', clientExtensionResults: {},
    });
  }
}

export async function expectStatus(res, status, what) {
  if (res.status !== status) {
    const body = await res.text().catch(() => '');
    throw new Error(`${what}: HTTP ${res.status}, want ${status}; location ${res.headers.get('location')}\n${body.slice(0, 800)}`);
  }
}

// keyPair makes a non-extractable private key and its public JWK for registration.
export async function keyPair(alg) {
  const params = alg === 'ES256'
    ? { name: 'ECDSA', namedCurve: 'P-256' }
    : { name: 'RSA-PSS', hash: 'SHA-256', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) };
  const { privateKey, publicKey } = await crypto.subtle.generateKey(params, false, ['sign', 'verify']);
  const jwk = await crypto.subtle.exportKey('jwk', publicKey);
  delete jwk.key_ops;
  delete jwk.ext;
  return { privateKey, publicKey, jwk: { ...jwk, alg, use: 'sig', kid: `${alg.toLowerCase()}-${crypto.randomUUID()}` } };
}

// nonceRetries counts the use_dpop_nonce answers withNonceRetry has retried.
// fapiClient is the seed entry of a FAPI 2.0 client (profile fapi2, PKCE, PAR, DPoP-bound
// tokens, private_key_jwt) with one redirect URI; fields adds its keys (jwks or jwks_uri), its
// id_token algorithm and anything else, or overrides the defaults.
export function fapiClient({ id, name, redirectURI, ...fields }) {
  return {
    client_id: id, name, redirect_uris: [redirectURI], scopes: ['openid', 'email'],
    profile: 'fapi2', require_pkce: true, require_pushed_authorization_requests: true,
    dpop_bound_access_tokens: true, token_endpoint_auth_method: 'private_key_jwt', ...fields,
  };
}

export const nonceRetries = { count: 0 };

// withNonceRetry runs a DPoP request once more when the server answers use_dpop_nonce (RFC
// 9449 8): oauth4webapi has cached the nonce by then and puts it in the new proof.
export async function withNonceRetry(send, process) {
  try {
    return await process(await send());
  } catch (err) {
    if (oauth.isDPoPNonceError(err)) {
      nonceRetries.count++;
      return process(await send());
    }
    throw err;
  }
}

// appBackend is the bank's app backend of a CIBA test: an ES256 key the server trusts for
// decision tokens (env: AUTH_CIBA_APP_ISSUER and AUTH_CIBA_APP_JWKS, for startServer), and
// decide(), the one step through which these tests decide a request: as the customer's app
// would, it posts a decision token (docs/api.md, "The bank's app backend: the contract") to the
// server's decision callback. The request's ref is what the device's event carries,
// oauth.BackchannelRequestID of the auth_req_id ("bc_" and its base64url SHA-256, no home
// locally); the test computes it, having no event bus.
export async function appBackend() {
  const { privateKey, jwk } = await keyPair('ES256');
  const iss = 'https://app-backend.bank.test';
  return {
    env: { AUTH_CIBA_APP_ISSUER: iss, AUTH_CIBA_APP_JWKS: JSON.stringify({ keys: [jwk] }) },
    // decide posts sub's decision on the request of authReqID (an approval with a passkey
    // and its user verification, strong as an approval must be) and returns the response.
    async decide(server, authReqID, { approve, sub = USER.uid, amr = ['hwk', 'mfa'] }) {
      const now = Math.floor(Date.now() / 1000);
      const ref = 'bc_' + createHash('sha256').update(authReqID).digest('base64url');
      const header = { alg: 'ES256', typ: 'ciba-decision+jwt', kid: jwk.kid };
      const claims = { iss, aud: server.issuer.href, iat: now, exp: now + 60, jti: crypto.randomUUID(), ref, sub,
        decision: approve ? 'approved' : 'denied', amr, auth_time: now };
      const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
      const input = `${b64(header)}.${b64(claims)}`;
      const sig = await crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, privateKey, new TextEncoder().encode(input));
      return fetch(new URL(ISSUER_PATH + '/bc-authorize/decision', server.base), {
        method: 'POST', headers: { 'content-type': 'application/jwt' }, body: `${input}.${Buffer.from(sig).toString('base64url')}`,
      });
    },
  };
}

// pingReceiver is a ping client's notification endpoint (CIBA Core 10.2): an https server on
// loopback with a certificate made for it by openssl, whose PEM the server under test trusts
// through SSL_CERT_FILE (env). next() resolves with the next ping's method, headers and body.
export async function pingReceiver() {
  const { execFileSync } = await import('node:child_process');
  const { readFile } = await import('node:fs/promises');
  const https = await import('node:https');
  const dir = await mkdtemp(join(tmpdir(), 'ping-'));
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const waiting = [];
  const got = [];
  const srv = https.createServer({ key: await readFile(key), cert: await readFile(cert) }, (req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      res.writeHead(204).end();
      const ping = { method: req.method, url: req.url, headers: req.headers, body };
      const w = waiting.shift();
      if (w) w(ping); else got.push(ping);
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${srv.address().port}/ciba/notify`,
    env: { SSL_CERT_FILE: cert, AUTH_JWKS_URI_ALLOW_PRIVATE: 'true' },
    next: () => (got.length ? Promise.resolve(got.shift()) : new Promise((resolve) => waiting.push(resolve))),
    count: () => got.length,
    async close() {
      await new Promise((resolve) => srv.close(resolve));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
