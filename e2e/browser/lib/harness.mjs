// The harness of the browser tests: it builds and starts the local authorization server with a
// seeded client and users, runs a tiny HTTP listener that stands for the client's redirect URI,
// and launches Debian's Chromium through playwright-core. Nothing is downloaded and no traffic
// leaves the loopback interface.
import { spawn, execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtemp, writeFile, mkdir, rm, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '../../..');
export const screenshotDir = resolve(here, '../screenshots');

export const PREFIX = '/v2/authentication/oauth2';
export const AUTHORIZE = `${PREFIX}/authorize`;
export const TOKEN = `${PREFIX}/token`;
export const DISCOVERY = `${PREFIX}/.well-known/openid-configuration`;

// The flags Chromium needs on these machines: no sandbox as root, no GPU, and nothing that
// reaches for the network on its own. Playwright adds a fresh, temporary --user-data-dir at
// every launch and removes it on close.
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

// The registered application and the bank customers of the tests.
export const client = {
  client_id: 'budget-app',
  client_secret: 'budget-app-secret-0123456789abcdef0123',
  name: 'Budget Planner',
  logo_uri: 'https://logo.budget-planner.example/logo.svg',
  scopes: ['openid', 'email', 'phone', 'profile', 'bank:transfers:write'],
  authorization_details_types: ['payment_initiation', 'account_information'],
  // CIBA's grant besides the defaults, for the bank app page's test (bankapp.test.mjs).
  grant_types: ['authorization_code', 'refresh_token', 'urn:openid:params:grant-type:ciba'],
};
export const alice = { uid: 'uid-alice', username: 'alice', password: 'correct-horse-battery-staple', name: 'Alice Martin' };
export const bob = { uid: 'uid-bob', username: 'bob', password: 'tr0ub4dor-and-3-more-words', name: 'Bob Durand' };
// A user who confirms payments with a passkey (sca.test.mjs, dynamic linking), no factor at first.
export const payer = { uid: 'uid-payer', username: 'payer', password: 'payer-password-0123456789', name: 'Paula Lefort' };
// Fresh users for the strong-authentication pages, one per language and width (each sets up
// its own factors).
export const scaUsers = Object.fromEntries(['en-phone', 'fr-phone', 'en-desktop', 'fr-desktop'].map((k) => [k,
  { uid: `uid-sca-${k}`, username: `sca-${k}`, password: 'sca-password-0123456789', name: 'Chris Moreau' }]));

// The application's logo, served by the test in place of its https address (see routeLogo).
const LOGO_SVG = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 40 40"><rect width="40" height="40" rx="8" fill="#0f766e"/><path d="M10 28V16h5v12zm7.5 0V10h5v18zm7.5 0v-8h5v8z" fill="#fff"/></svg>';

const execFileP = promisify(execFile);

/** freePort asks the kernel for a free loopback port. */
export async function freePort() {
  const srv = createNetServer();
  await new Promise((ok, fail) => srv.listen(0, '127.0.0.1', ok).on('error', fail));
  const { port } = srv.address();
  await new Promise((ok) => srv.close(ok));
  return port;
}

/** startCallback runs the client's redirect URI: it records each request and answers a page. */
async function startCallback() {
  const hits = [];
  const waiters = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url, `http://${req.headers.host}`);
    hits.push(url);
    waiters.splice(0).forEach((w) => w(url));
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><html lang="en"><title>Budget Planner</title><h1>Back at the application</h1></html>');
  });
  await new Promise((ok, fail) => server.listen(0, '127.0.0.1', ok).on('error', fail));
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    redirectURI: `${base}/callback`,
    hits,
    close: () => new Promise((ok) => server.close(ok)),
  };
}

/** signedOutURI is the test client's registered post_logout_redirect_uri, beside its redirect URI. */
export function signedOutURI(redirectURI) {
  return redirectURI.replace(/\/callback$/, '/signed-out');
}

/** buildServer builds cmd/authserver into dir, unless AUTHSERVER_BIN names a built one. */
async function buildServer(dir) {
  if (process.env.AUTHSERVER_BIN) return process.env.AUTHSERVER_BIN;
  const bin = join(dir, 'authserver');
  await execFileP('go', ['build', '-o', bin, './cmd/authserver'], { cwd: repoRoot, maxBuffer: 16 << 20 });
  return bin;
}

/**
 * startServer builds and starts the local server on a free port with a seed file of the test
 * client and users, and waits (bounded) until its discovery document answers.
 */
async function startServer(dir, redirectURI) {
  const bin = await buildServer(dir);
  const seed = {
    clients: [{ ...client, redirect_uris: [redirectURI], post_logout_redirect_uris: [signedOutURI(redirectURI)] }],
    users: [alice, bob, payer, ...Object.values(scaUsers)].map((u) => ({
      uid: u.uid, username: u.username, password: u.password, name: u.name, email: `${u.username}@example.com`,
      email_verified: true, companyProfileId: `cp-${u.username}`, companyUserId: `cu-${u.username}`,
    })),
  };
  const seedFile = join(dir, 'seed.json');
  await writeFile(seedFile, JSON.stringify(seed), { mode: 0o600 });
  const port = await freePort();
  // The pages' origin is localhost, a secure context whose name can be a WebAuthn relying
  // party ID (an IP address cannot); the test's own requests go to 127.0.0.1 (api), so that
  // Node never tries ::1 first.
  const base = `http://localhost:${port}`;
  const api = `http://127.0.0.1:${port}`;
  const logFile = join(dir, 'server.log');
  const log = [];
  const proc = spawn(bin, ['--addr', `127.0.0.1:${port}`, '--data', join(dir, 'data'), '--seed', seedFile], {
    // The per-address rate limits are off: every test signs in from 127.0.0.1, faster than
    // people do (the limits have their own Go tests).
    cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, AUTH_BASE_URL: base, AUTH_RATE_LIMIT: 'false' },
  });
  proc.stdout.on('data', (b) => log.push(b));
  proc.stderr.on('data', (b) => log.push(b));
  let exited = null;
  proc.on('exit', (code, signal) => { exited = { code, signal }; });
  for (let i = 0; i < 200; i++) {
    if (exited) throw new Error(`authserver exited (${JSON.stringify(exited)}):\n${Buffer.concat(log)}`);
    try {
      const r = await fetch(api + DISCOVERY);
      if (r.ok) break;
    } catch { /* not listening yet */ }
    if (i === 199) {
      proc.kill('SIGKILL');
      throw new Error(`authserver did not answer at ${base}:\n${Buffer.concat(log)}`);
    }
    await new Promise((ok) => setTimeout(ok, 100));
  }
  return {
    base,
    api,
    log: () => Buffer.concat(log).toString(),
    async stop() {
      if (!exited) {
        const done = new Promise((ok) => proc.once('exit', ok));
        proc.kill('SIGTERM');
        await done;
      }
      await writeFile(logFile, Buffer.concat(log));
    },
  };
}

/** setup starts everything one test file needs; teardown undoes it. */
export async function setup() {
  const env = { dir: await mkdtemp(join(tmpdir(), 'authserver-browser-')) };
  // teardown undoes whatever was started, so a failed setup leaves nothing running that would
  // keep the test process alive.
  env.teardown = async () => {
    await env.browser?.close().catch(() => {});
    await env.server?.stop().catch(() => {});
    await env.callback?.close().catch(() => {});
    if (!process.env.KEEP_TMP) await rm(env.dir, { recursive: true, force: true });
  };
  try {
    env.callback = await startCallback();
    env.server = await startServer(env.dir, env.callback.redirectURI);
    env.browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    await mkdir(screenshotDir, { recursive: true });
  } catch (err) {
    await env.teardown();
    throw err;
  }
  return env;
}

/**
 * newContext opens a fresh browser context (its own cookies) that can reach only the local
 * servers: the client's logo is answered from memory and anything else off loopback is
 * refused and noted in ctx.externalRequests (the pages load no asset from elsewhere). CSP
 * violations the pages cause are collected in ctx.cspViolations.
 */
export async function newContext(browser, options = {}) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...options });
  ctx.cspViolations = [];
  ctx.externalRequests = [];
  await ctx.route((url) => url.hostname === new URL(client.logo_uri).hostname, (route) =>
    route.fulfill({ status: 200, contentType: 'image/svg+xml', body: LOGO_SVG }));
  await ctx.route((url) => !['127.0.0.1', 'localhost', new URL(client.logo_uri).hostname].includes(url.hostname),
    (route) => { ctx.externalRequests.push(route.request().url()); return route.abort('blockedbyclient'); });
  ctx.on('console', (msg) => {
    if (/Content Security Policy/i.test(msg.text())) ctx.cspViolations.push(msg.text());
  });
  ctx.on('page', (page) => page.on('console', (msg) => {
    if (/Content Security Policy/i.test(msg.text())) ctx.cspViolations.push(msg.text());
  }));
  return ctx;
}

/** authorizeURL is an authorization request of the test client. */
export function authorizeURL(env, params = {}) {
  // prompt=consent: these tests are about the pages, so each authorization shows the consent
  // page even when an earlier test's grant would let it be skipped (remembered consent); a
  // test of remembered consent passes prompt: undefined, which leaves it out.
  const all = {
    client_id: client.client_id, redirect_uri: env.callback.redirectURI, response_type: 'code',
    scope: 'openid email profile', state: 'st-' + Math.random().toString(36).slice(2), prompt: 'consent', ...params,
  };
  const q = new URLSearchParams(Object.entries(all).filter(([, v]) => v !== undefined));
  return `${env.server.base}${AUTHORIZE}?${q}`;
}

/** exchange trades a code at the token endpoint, as the client's back end would. */
/** openAuthorize opens an authorization request of env with params and waits for the login page. */
export async function openAuthorize(env, page, params) {
  const resp = await page.goto(authorizeURL(env, params));
  if (resp.status() !== 200) throw new Error(`authorize answered ${resp.status()}`);
  await page.waitForSelector('#username');
}

/** signIn signs in with a user's password on the login page that is open. */
export async function signIn(page, user) {
  await page.fill('#username', user.username);
  await page.fill('#password', user.password);
  await Promise.all([page.waitForEvent('load'), page.click('form:not(.passkey) button[type=submit]')]);
}

/** submit clicks selector and waits for the page that answers. */
export async function submit(page, selector) {
  await Promise.all([page.waitForEvent('load'), page.click(selector)]);
}

export async function exchange(env, code) {
  const r = await fetch(env.server.api + TOKEN, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code', code, redirect_uri: env.callback.redirectURI,
      client_id: client.client_id, client_secret: client.client_secret,
    }),
  });
  return { status: r.status, body: await r.json() };
}

/** idTokenClaims reads the claims of an id_token (its signature is verified by the Go tests). */
export function idTokenClaims(idToken) {
  return JSON.parse(Buffer.from(idToken.split('.')[1], 'base64url').toString());
}

/**
 * totpCode is the code an authenticator app shows for the base32 secret at time (RFC 6238:
 * HMAC-SHA-1 of the 30-second step, 6 digits), computed with node:crypto.
 */
export function totpCode(secret, time = Date.now()) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const c of secret.replace(/\s+/g, '').toUpperCase()) bits += alphabet.indexOf(c).toString(2).padStart(5, '0');
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)));
  const step = Buffer.alloc(8);
  step.writeBigUInt64BE(BigInt(Math.floor(time / 30000)));
  const mac = createHmac('sha1', key).update(step).digest();
  const off = mac[mac.length - 1] & 0xf;
  return String((mac.readUInt32BE(off) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

/** runAxe checks the open page with axe-core and returns its serious and critical violations. */
export async function runAxe(page) {
  const axeSource = await readFile(resolve(here, '../node_modules/axe-core/axe.min.js'), 'utf8');
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, {
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] },
    resultTypes: ['violations'],
  }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

/** screenshot writes the open page, full length, to the screenshots folder. */
export async function screenshot(page, name) {
  await page.screenshot({ path: join(screenshotDir, `${name}.png`), fullPage: true });
}
