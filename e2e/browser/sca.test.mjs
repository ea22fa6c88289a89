// Strong customer authentication in Chromium: the authenticator app set up and used with codes
// computed from the key the page shows, a passkey added and used with Chromium's virtual
// authenticator (a CDP session: WebAuthn.enable, WebAuthn.addVirtualAuthenticator), the
// step-up the transfers scope asks for, the id_token's acr and amr, the new pages in French,
// with the keyboard alone, and under axe-core at phone and desktop widths (with screenshots);
// a payment confirmed with a passkey over its details (dynamic linking).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  alice, AUTHORIZE, authorizeURL, bob, exchange, idTokenClaims, newContext, openAuthorize, payer, runAxe, scaUsers, screenshot, setup, signIn, submit, totpCode,
} from './lib/harness.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.teardown(); });

const transfers = { scope: 'openid email bank:transfers:write' };

const open = (page, params) => openAuthorize(env, page, params);

async function allow(page) {
  await Promise.all([page.waitForURL((u) => u.href.startsWith(env.callback.redirectURI)), page.click('button[name=decision][value=allow]')]);
  const code = new URL(page.url()).searchParams.get('code');
  assert.ok(code, 'the redirect carries a code');
  const { status, body } = await exchange(env, code);
  assert.equal(status, 200, JSON.stringify(body));
  return idTokenClaims(body.id_token);
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

/** theKey reads the authenticator app key the set-up page shows. */
const theKey = (page) => page.textContent('#totp-secret');

describe('the authenticator app', () => {
  it('is set up for a payment request, its recovery codes shown once, then asked at the next sign-in (keyboard only)', async () => {
    const ctx = await newContext(env.browser, { viewport: { width: 375, height: 812 } });
    try {
      const page = await ctx.newPage();
      await open(page, transfers);
      await signIn(page, bob);
      assert.match(await page.textContent('h1'), /Set up a second step/);
      assert.ok(await page.$eval('img.qr', (img) => img.complete && img.naturalWidth > 0 && img.src.startsWith('data:image/png')), 'the QR code is shown');
      const secret = await theKey(page);
      await page.fill('#code', '000000');
      await submit(page, 'form:has(input[value=totp_enroll]) button[type=submit]');
      assert.match(await page.textContent('[role=alert]'), /did not match/, 'a wrong code is refused with one message');
      assert.equal(await theKey(page), secret, 'the same key is shown again');
      await page.fill('#code', totpCode(secret));
      await submit(page, 'form:has(input[value=totp_enroll]) button[type=submit]');
      assert.match(await page.textContent('h1'), /recovery codes/);
      const codes = await page.$$eval('.codes code', (els) => els.map((e) => e.textContent));
      assert.equal(codes.length, 10, 'ten recovery codes');
      await submit(page, 'button[type=submit]');
      assert.match(await page.textContent('.badge'), /move money/i, 'the consent page marks the transfers scope');
      const claims = await allow(page);
      assert.equal(claims.acr, 'urn:acmebank:acr:sca');
      assert.deepEqual(claims.amr, ['pwd', 'otp', 'mfa']);

      // A new sign-in: the code of the next step, typed with the keyboard alone.
      await ctx.clearCookies();
      await open(page, transfers);
      await signIn(page, bob);
      assert.match(await page.textContent('h1'), /Confirm it is you/);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'code', 'the code field has the focus');
      await page.keyboard.type(totpCode(secret, Date.now() + 30000));
      await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
      assert.equal((await allow(page)).acr, 'urn:acmebank:acr:sca');
      assert.deepEqual(ctx.cspViolations, [], 'no CSP violation');
    } finally {
      await ctx.close();
    }
  });
});

describe('passkeys', () => {
  it('are added after a password sign-in, then sign in alone and strongly, with the virtual authenticator', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await ctx.newPage();
      const { cdp, authenticatorId } = await virtualAuthenticator(page);
      await open(page, { scope: 'openid email' });
      await signIn(page, alice);
      await submit(page, 'form.offer button[type=submit]');
      assert.match(await page.textContent('h1'), /passkey/);
      await page.waitForSelector('form.passkey:not([hidden])');
      await submit(page, '[data-passkey-start]');
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
      assert.equal(credentials.length, 1, 'the authenticator holds one passkey');
      assert.ok(credentials[0].isResidentCredential, 'a discoverable passkey');
      assert.equal(await page.$('form.offer'), null, 'the offer is gone once the user has a passkey');
      const first = await allow(page);
      assert.deepEqual(first.amr, ['pwd', 'hwk', 'user', 'mfa'], 'password, then the new passkey with user verification');

      // Signed out: the login page offers the passkey in the username field's autofill
      // (conditional mediation), which the virtual authenticator answers at once; the passkey
      // alone signs in, strongly enough for a payment.
      await ctx.clearCookies();
      await page.goto(authorizeURL(env, transfers));
      await page.waitForSelector('button[name=decision][value=allow]');
      const claims = await allow(page);
      assert.equal(claims.acr, 'urn:acmebank:acr:sca');
      assert.deepEqual(claims.amr, ['hwk', 'user', 'mfa']);
      const after = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0];
      assert.ok(after.signCount > credentials[0].signCount, 'the signature counter went up');

      // A password sign-in is asked for the passkey as its second step (its button: an
      // explicit request, answered once the user is present).
      await ctx.clearCookies();
      await cdp.send('WebAuthn.setAutomaticPresenceSimulation', { authenticatorId, enabled: false });
      await open(page, transfers);
      await signIn(page, alice);
      assert.match(await page.textContent('h1'), /Confirm it is you/);
      await page.waitForSelector('form.passkey:not([hidden])');
      await cdp.send('WebAuthn.setAutomaticPresenceSimulation', { authenticatorId, enabled: true });
      await Promise.all([page.waitForSelector('button[name=decision][value=allow]'), page.click('[data-passkey-start]')]);
      assert.deepEqual((await allow(page)).amr, ['pwd', 'hwk', 'user', 'mfa']);
      assert.deepEqual(ctx.cspViolations, [], 'passkey.js runs under the pages\' CSP');
      assert.deepEqual(ctx.externalRequests, []);
    } finally {
      await ctx.close();
    }
  });
});

describe('dynamic linking: a payment is confirmed with a passkey over its amount and payee', () => {
  const payment = (amount, payee) => JSON.stringify([{
    type: 'payment_initiation', instructedAmount: { currency: 'EUR', amount },
    creditorName: payee, creditorAccount: { iban: 'DE89370400440532013000' },
  }]);
  const challengeOf = (page) => page.$eval('form.passkey', (f) => JSON.parse(f.dataset.options).publicKey.challenge);

  it('adds the passkey the payment needs, confirms with it, and refuses that confirmation on another payment; axe-clean in en and fr', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await ctx.newPage();
      const { cdp, authenticatorId } = await virtualAuthenticator(page);
      await open(page, { scope: 'openid', authorization_details: payment('42.00', 'Bakery Dupont') });
      await signIn(page, payer);
      // No passkey yet: the page says so, shows the payment, and offers to add one; no Allow.
      assert.match(await page.textContent('h1'), /Confirm a payment/);
      assert.ok(await page.$('#payment-nofactor'), 'the page says a passkey is needed');
      assert.equal(await page.$('button[name=decision][value=allow]'), null, 'a payment page has no Allow');
      assert.match(await page.textContent('section.detail'), /42\.00/);
      await submit(page, 'form.offer button[type=submit]');
      await page.waitForSelector('form.passkey:not([hidden])');
      await submit(page, '[data-passkey-start]');
      // The payment page again, its confirmation a passkey ceremony.
      await page.waitForSelector('form.passkey:not([hidden]):has(input[value=payment_passkey])');
      for (const v of await runAxe(page)) assert.fail(`payment page (en): ${v}`);
      await screenshot(page, 'payment-passkey');

      // Another pending payment in a second tab: 999.00 to someone else. The confirmation of
      // 42.00 (signed by the authenticator over 42.00's challenge) posted to it is refused.
      const other = await ctx.newPage();
      await other.goto(authorizeURL(env, { scope: 'openid', authorization_details: payment('999.00', 'Mule Ltd') }));
      await other.waitForSelector('form.passkey:not([hidden]):has(input[value=payment_passkey])');
      const target = await other.$eval('form.passkey', (f) => ({ id: f.elements.request_id.value, csrf: f.elements.csrf_token.value }));
      assert.notEqual(await challengeOf(other), await challengeOf(page), 'another payment, another challenge');
      await page.route((u) => u.pathname === AUTHORIZE, (route) => {
        const req = route.request();
        if (req.method() !== 'POST') return route.continue();
        const body = new URLSearchParams(req.postData());
        body.set('request_id', target.id);
        body.set('csrf_token', target.csrf);
        return route.continue({ postData: body.toString() });
      });
      const before = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0].signCount;
      const [refused] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.click('[data-passkey-start]')]);
      assert.ok(refused.status() >= 400 && refused.status() < 500, `the redirected confirmation answered ${refused.status()}`);
      assert.ok(!page.url().startsWith(env.callback.redirectURI), 'no code for the other payment');
      const after = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0].signCount;
      assert.ok(after > before, 'the authenticator did sign (over 42.00)');
      await page.unroute((u) => u.pathname === AUTHORIZE);

      // The 999.00 payment is still pending, and its own confirmation passes (the passkey,
      // copied to the second tab's authenticator); its token response carries its details and
      // no refresh token.
      const copy = await virtualAuthenticator(other);
      const [cred] = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
      await copy.cdp.send('WebAuthn.addCredential', { authenticatorId: copy.authenticatorId, credential: cred });
      await Promise.all([other.waitForURL((u) => u.href.startsWith(env.callback.redirectURI)), other.click('[data-passkey-start]')]);
      const { status, body } = await exchange(env, new URL(other.url()).searchParams.get('code'));
      assert.equal(status, 200, JSON.stringify(body));
      assert.equal(body.authorization_details[0].instructedAmount.amount, '999.00');
      assert.equal(body.refresh_token, undefined, 'a payment grant has no refresh token');
      assert.deepEqual(ctx.cspViolations, [], 'passkey.js runs under the pages\' CSP');
      assert.deepEqual(ctx.externalRequests, []);

      // In French, at a phone's width: the payment page passes axe.
      const fr = await ctx.newPage();
      await fr.setViewportSize({ width: 375, height: 812 });
      await virtualAuthenticator(fr);
      await fr.goto(authorizeURL(env, { scope: 'openid', ui_locales: 'fr', authorization_details: payment('42.00', 'Bakery Dupont') }));
      await fr.waitForSelector('form.passkey:not([hidden])');
      assert.match(await fr.textContent('h1'), /Confirmer un paiement/);
      for (const v of await runAxe(fr)) assert.fail(`payment page (fr, phone): ${v}`);
      await screenshot(fr, 'payment-passkey-fr-phone');
    } finally {
      await ctx.close();
    }
  });
});

describe('accessibility (axe-core) and screenshots of the strong-authentication pages', () => {
  const widths = { phone: { width: 375, height: 812 }, desktop: { width: 1280, height: 900 } };
  for (const [device, viewport] of Object.entries(widths)) {
    it(`set-up, recovery codes, second step and passkey pages pass axe at ${device} width, in English and French`, async () => {
      const found = [];
      for (const lang of ['en', 'fr']) {
        const ctx = await newContext(env.browser, { viewport, bypassCSP: true });
        const check = async (page, name) => {
          await page.waitForLoadState('load');
          await screenshot(page, `${name}${lang === 'fr' ? '-fr' : ''}-${device}`);
          for (const v of await runAxe(page)) found.push(`${name} (${lang}): ${v}`);
        };
        try {
          const user = scaUsers[`${lang}-${device}`];
          const page = await ctx.newPage();
          await virtualAuthenticator(page);
          await open(page, { ...transfers, ui_locales: lang });
          await signIn(page, user);
          await check(page, 'totp-setup');
          const secret = await theKey(page);
          await page.fill('#code', '111111');
          await submit(page, 'form:has(input[value=totp_enroll]) button[type=submit]');
          await check(page, 'totp-setup-error');
          await page.fill('#code', totpCode(secret));
          await submit(page, 'form:has(input[value=totp_enroll]) button[type=submit]');
          await check(page, 'recovery-codes');
          await submit(page, 'button[type=submit]');
          await submit(page, 'form.offer button[type=submit]');
          await check(page, 'passkey-add');
          await ctx.clearCookies();
          await open(page, { ...transfers, ui_locales: lang });
          await signIn(page, user);
          await check(page, 'second-step');
        } finally {
          await ctx.close();
        }
      }
      assert.deepEqual(found, [], 'no serious or critical accessibility violation');
    });
  }
});

