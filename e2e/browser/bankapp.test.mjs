// The local bank app page in Chromium (issue 31): the page of the local server that stands in
// for the bank's mobile app, CIBA's authentication device. A client starts a backchannel
// authentication request for alice with a binding message; alice signs in on /bank-app with her
// password, sees the request with its binding message, approves it with her passkey (Chromium's
// virtual authenticator, over a challenge bound to the request), and the client's poll gets the
// tokens. The page in en and fr at phone and desktop widths passes axe-core (with screenshots).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  alice, client, idTokenClaims, newContext, openAuthorize, PREFIX, runAxe, screenshot, setup, signIn, submit, TOKEN,
} from './lib/harness.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.teardown(); });

const BANK_APP = '/bank-app';
const BACKCHANNEL = `${PREFIX}/bc-authorize`;
const CIBA = 'urn:openid:params:grant-type:ciba';

/** post sends a form to the local server as the client's back end would (client_secret_post). */
async function post(path, params) {
  const r = await fetch(env.server.api + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ client_id: client.client_id, client_secret: client.client_secret, ...params }),
  });
  return { status: r.status, body: await r.json() };
}

/** startCIBA is the client's backchannel authentication request for user; its auth_req_id. */
async function startCIBA(user, bindingMessage, extra = {}) {
  const { status, body } = await post(BACKCHANNEL, { scope: 'openid', login_hint: user.username, binding_message: bindingMessage, ...extra });
  assert.equal(status, 200, JSON.stringify(body));
  return body.auth_req_id;
}

/** virtualAuthenticator gives the page a platform authenticator with user verification. */
async function virtualAuthenticator(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  return { cdp, authenticatorId };
}

/** signInBankApp signs user in on the bank app page that is open. */
async function signInBankApp(page, user) {
  await page.fill('#username', user.username);
  await page.fill('#password', user.password);
  await submit(page, 'form:has(input[value=sign_in]) button[type=submit]');
}

const requestSection = (message) => `section.request:has(.binding-code:text-is("${message}"))`;

describe('the bank app page', () => {
  it('shows alice the request with its binding message; she approves it with her passkey and the client polls the tokens', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await ctx.newPage();
      const { cdp, authenticatorId } = await virtualAuthenticator(page);
      // alice adds her passkey on the consent page of an ordinary sign-in.
      await openAuthorize(env, page, { scope: 'openid email' });
      await signIn(page, alice);
      await submit(page, 'form.offer button[type=submit]');
      await page.waitForSelector('form.passkey:not([hidden])');
      await submit(page, '[data-passkey-start]');
      assert.equal((await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials.length, 1, 'alice holds a passkey');

      const authReqID = await startCIBA(alice, 'K7-42');
      const pending = await post(TOKEN, { grant_type: CIBA, auth_req_id: authReqID });
      assert.equal(pending.body.error, 'authorization_pending', JSON.stringify(pending.body));

      const resp = await page.goto(`${env.server.base}${BANK_APP}`);
      assert.equal(resp.status(), 200);
      assert.match(resp.headers()['content-security-policy'], /frame-ancestors 'none'/);
      await signInBankApp(page, alice);
      const section = requestSection('K7-42');
      assert.equal(await page.textContent(`${section} h2`), client.name, 'the request names the client');
      assert.match(await page.textContent(`${section} .binding`), /same code/, 'the page says to compare the code');
      assert.ok(!(await page.content()).includes(authReqID), 'the page never shows the auth_req_id');

      await submit(page, `${section} button[value=approve]`);
      await page.waitForSelector('form.passkey:not([hidden]):has(input[value=approve_passkey])');
      assert.equal(await page.textContent('.binding-code'), 'K7-42', 'the approval shows the binding message again');
      const before = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0].signCount;
      await submit(page, '[data-passkey-start]');
      assert.match(await page.textContent('.alert.done'), /You approved the request of Budget Planner/);
      assert.equal(await page.$(section), null, 'the request is no longer listed');
      const after = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0].signCount;
      assert.ok(after > before, 'the passkey signed the approval');

      const { status, body } = await post(TOKEN, { grant_type: CIBA, auth_req_id: authReqID });
      assert.equal(status, 200, JSON.stringify(body));
      const claims = idTokenClaims(body.id_token);
      assert.ok(claims.amr.includes('mfa'), `the approval is strong: amr ${claims.amr}`);
      assert.deepEqual(ctx.cspViolations, [], 'passkey.js runs under the page\'s CSP');
      assert.deepEqual(ctx.externalRequests, []);
    } finally {
      await ctx.close();
    }
  });

  it('passes axe in en and fr at phone and desktop widths: signed out, the list with a payment, the approval', async () => {
    const payment = JSON.stringify([{
      type: 'payment_initiation', instructedAmount: { currency: 'EUR', amount: '42.00' },
      creditorName: 'Bakery Dupont', creditorAccount: { iban: 'DE89370400440532013000' },
    }]);
    await startCIBA(alice, 'PAY-42', { authorization_details: payment });
    for (const lang of ['en', 'fr']) {
      for (const [width, viewport] of [['phone', { width: 375, height: 812 }], ['desktop', { width: 1280, height: 900 }]]) {
        const ctx = await newContext(env.browser, { viewport });
        try {
          const page = await ctx.newPage();
          await page.goto(`${env.server.base}${BANK_APP}?ui_locales=${lang}`);
          assert.equal(await page.getAttribute('html', 'lang'), lang);
          for (const v of await runAxe(page)) assert.fail(`bank app signed out (${lang}, ${width}): ${v}`);
          await screenshot(page, `bankapp-signin-${lang}-${width}`);
          await signInBankApp(page, alice);
          const section = requestSection('PAY-42');
          assert.match(await page.textContent(section), /Bakery Dupont/, 'the payee is shown');
          assert.match(await page.textContent(section), /42[.,]00/, 'the amount is shown');
          for (const v of await runAxe(page)) assert.fail(`bank app list (${lang}, ${width}): ${v}`);
          await screenshot(page, `bankapp-list-${lang}-${width}`);
          await submit(page, `${section} button[value=approve]`);
          await page.waitForSelector('form.passkey:not([hidden]):has(input[value=approve_passkey])');
          for (const v of await runAxe(page)) assert.fail(`bank app approval (${lang}, ${width}): ${v}`);
          await screenshot(page, `bankapp-approve-${lang}-${width}`);
          await submit(page, 'button[value=cancel]');
          assert.ok(await page.$(section), 'back on the list, the payment still pending');
          assert.deepEqual(ctx.cspViolations, []);
        } finally {
          await ctx.close();
        }
      }
    }
  });
});
