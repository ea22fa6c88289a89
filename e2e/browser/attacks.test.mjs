// The attacker's sign-in in Chromium (issue 24, "Sign-in integrity"): the real pages, with the
// hostile forms an attacker posts on them (a form added to the page with page.evaluate, or a
// request with the context's cookies). Outcomes only: no consent page reached, no recovery codes
// shown, no code sent to the client, and the victim's own authenticator app and recovery code
// still work afterwards. A refused action may answer with any 4xx page or the second step again.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  AUTHORIZE, alice, authorizeURL, bob, exchange, idTokenClaims, newContext, openAuthorize, scaUsers, setup, signIn, submit, totpCode,
} from './lib/harness.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.teardown(); });

const transfers = { scope: 'openid email bank:transfers:write' };

const open = (page, params) => openAuthorize(env, page, params);

const onConsent = async (page) => (await page.$('button[name=decision][value=allow]')) !== null;
const showsRecoveryCodes = async (page) => (await page.$('.codes code')) !== null;
const onStep = async (page) => (await page.$('input[name=action][value=mfa_totp]')) !== null;

/** virtualAuthenticator gives the page a platform authenticator with user verification. */
async function virtualAuthenticator(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  return { cdp, authenticatorId };
}

/** pendingForm is the pending request's form fields of the open page: its id and CSRF token. */
async function pendingForm(page) {
  return {
    request_id: await page.$eval('input[name=request_id]', (e) => e.value),
    csrf_token: await page.$eval('input[name=csrf_token]', (e) => e.value),
  };
}

/**
 * postFromPage adds a form with fields to the open page and submits it, as a hostile script
 * would: the browser shows what the server answers.
 */
async function postFromPage(page, fields) {
  const [resp] = await Promise.all([
    page.waitForNavigation({ timeout: 15000 }),
    page.evaluate(({ action, fields }) => {
      const f = document.createElement('form');
      f.method = 'post';
      f.action = action;
      for (const [k, v] of Object.entries(fields)) {
        const i = document.createElement('input');
        i.type = 'hidden';
        i.name = k;
        i.value = v;
        f.append(i);
      }
      document.body.append(f);
      f.submit();
    }, { action: AUTHORIZE, fields }),
  ]);
  return resp.status();
}

/**
 * postWithCookies posts fields to the authorization endpoint with the context's cookies, not
 * following a redirect: it returns the status, the page and the code a redirect carries.
 */
async function postWithCookies(ctx, fields) {
  const r = await ctx.request.post(env.server.base + AUTHORIZE, { form: fields, maxRedirects: 0 });
  const location = r.headers().location || '';
  const code = location.startsWith(env.callback.redirectURI) ? new URL(location).searchParams.get('code') : null;
  return { status: r.status(), body: await r.text(), code };
}

const refusedAnswer = ({ status, body }) => (status >= 400 && status < 500)
  || (status === 200 && !body.includes('value="allow"') && !body.includes('class="codes"'));

/** tokenOf exchanges a code that should not have been issued, to say what it grants. */
async function tokenOf(code) {
  const { body } = await exchange(env, code);
  const c = body.id_token ? idTokenClaims(body.id_token) : {};
  return `scope ${body.scope}, acr ${c.acr}, amr ${JSON.stringify(c.amr)}`;
}

/** enrolApp sets up user's authenticator app in ctx, and returns its key and recovery codes. */
async function enrolApp(ctx, user) {
  const page = await ctx.newPage();
  await open(page, transfers);
  await signIn(page, user);
  const secret = (await page.textContent('#totp-secret')).replace(/\s+/g, '');
  await page.fill('#code', totpCode(secret));
  await submit(page, 'form:has(input[value=totp_enroll]) button[type=submit]');
  const codes = await page.$$eval('.codes code', (els) => els.map((e) => e.textContent));
  assert.equal(codes.length, 10, 'ten recovery codes at set-up');
  await submit(page, 'button[type=submit]');
  assert.ok(await onConsent(page), 'the consent page after the set-up');
  await page.close();
  return { secret, codes };
}

/** ownAppStillWorks signs user in afresh with its app, then with a recovery code: both reach consent. */
async function ownAppStillWorks(ctx, user, { secret, codes }, problems) {
  await ctx.clearCookies();
  const page = await ctx.newPage();
  await open(page, transfers);
  await signIn(page, user);
  if (!(await onStep(page))) {
    problems.push(`${user.username}'s sign-in does not ask for the app's code`);
    return;
  }
  await page.fill('#code', totpCode(secret, Date.now() + 30000));
  await submit(page, 'form:has(input[value=mfa_totp]) button[type=submit]');
  if (!(await onConsent(page))) problems.push(`${user.username}'s own authenticator app is refused`);
  await ctx.clearCookies();
  await open(page, transfers);
  await signIn(page, user);
  await page.click('details summary');
  await page.fill('#recovery-code', codes[9]);
  await submit(page, 'form:has(input[value=mfa_recovery]) button[type=submit]');
  if (!(await onConsent(page))) problems.push(`${user.username}'s own recovery code is refused`);
  await page.close();
}

/**
 * madeUpPasskey creates, in the page's virtual authenticator, a passkey for uid with a ceremony
 * the attacker made up (the server showed none), and returns the browser's answer as JSON.
 */
function madeUpPasskey(page, user) {
  return page.evaluate(async ({ uid, name }) => {
    const b64u = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    const cred = await navigator.credentials.create({
      publicKey: {
        rp: { id: location.hostname, name: 'Acme Bank' },
        user: { id: new TextEncoder().encode(uid), name, displayName: name },
        challenge: crypto.getRandomValues(new Uint8Array(32)),
        pubKeyCredParams: [{ type: 'public-key', alg: -7 }],
        authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
      },
    });
    return JSON.stringify({
      id: cred.id, rawId: b64u(cred.rawId), type: cred.type,
      response: { clientDataJSON: b64u(cred.response.clientDataJSON), attestationObject: b64u(cred.response.attestationObject), transports: cred.response.getTransports() },
      authenticatorAttachment: cred.authenticatorAttachment, clientExtensionResults: cred.getClientExtensionResults(),
    });
  }, { uid: user.uid, name: user.username });
}

describe('attack 1: the password alone and a passkey of the attacker', () => {
  it('adds no passkey to a customer who has an authenticator app, issues no code, and the attacker\'s passkey does not sign in', async () => {
    const victim = await newContext(env.browser);
    const attacker = await newContext(env.browser);
    const problems = [];
    try {
      const app = await enrolApp(victim, alice);
      const callbacks = env.callback.hits.length;

      // The attacker has alice's password; on the second step it asks for a passkey set-up.
      const page = await attacker.newPage();
      const { cdp, authenticatorId } = await virtualAuthenticator(page);
      await open(page, transfers);
      await signIn(page, alice);
      assert.ok(await onStep(page), 'precondition: the second-factor page');
      const form = await pendingForm(page);
      const offer = await postFromPage(page, { ...form, action: 'passkey_offer' });
      if (await page.$('form.passkey[data-passkey=create]:not([hidden])')) {
        // The set-up page was shown: its own script adds the attacker's passkey.
        await submit(page, '[data-passkey-start]');
        if (await onConsent(page)) problems.push(`passkey_offer (${offer}) then the attacker's passkey reached the consent page`);
      } else {
        const answer = await postWithCookies(attacker, { ...form, action: 'passkey_register', credential: await madeUpPasskey(page, alice) });
        if (!refusedAnswer(answer)) problems.push(`passkey_register of a made-up ceremony: ${answer.status}, not refused`);
      }
      const allow = await postWithCookies(attacker, { ...form, action: 'consent', decision: 'allow' });
      if (allow.code) problems.push(`a code was issued to the password and the attacker's passkey: ${await tokenOf(allow.code)}`);

      // Signed out, the attacker's passkey answers the login page's autofill by itself; its
      // sign-in is posted once (a refused one is offered again: later posts are answered 204 by
      // the test, which leaves the page where it is).
      await attacker.clearCookies();
      let logins = 0;
      const isPasskeyLogin = (r) => r.method() === 'POST' && (r.postData() || '').includes('action=passkey_login');
      await page.route((u) => u.pathname === AUTHORIZE, (route) => (isPasskeyLogin(route.request()) && ++logins > 1
        ? route.fulfill({ status: 204, body: '' }) : route.continue()));
      const posted = page.waitForResponse((r) => isPasskeyLogin(r.request()), { timeout: 10000 }).catch(() => null);
      await page.goto(authorizeURL(env, transfers));
      const first = await posted;
      if (!first) problems.push('test precondition: the attacker\'s passkey was not tried on the login page (no autofill answer)');
      if (first) {
        const answer = { status: first.status(), body: await first.text().catch(() => null) };
        if (answer.body === null) {
          problems.push(`the answer to the attacker's passkey sign-in (${answer.status}) could not be read`);
        } else if (!refusedAnswer(answer)) {
          problems.push(`the attacker's passkey alone signed in: ${answer.status}, not refused`);
          const field = (name) => (answer.body.match(new RegExp(`name="${name}" value="([^"]*)"`)) || [])[1];
          const again = await postWithCookies(attacker, { request_id: field('request_id'), csrf_token: field('csrf_token'), action: 'consent', decision: 'allow' });
          if (again.code) problems.push(`a code was issued to the attacker's passkey alone: ${await tokenOf(again.code)}`);
        }
      }
      await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId });
      if (env.callback.hits.length !== callbacks) problems.push('the client received a redirect from the attacker\'s pages');

      await ownAppStillWorks(victim, alice, app, problems);
      assert.deepEqual(problems, []);
    } finally {
      await attacker.close();
      await victim.close();
    }
  });
});

describe('attack 2: another account\'s pending authenticator key', () => {
  it('never becomes the victim\'s authenticator: no recovery codes, no code, the victim\'s app and recovery codes still work', async () => {
    const target = scaUsers['en-desktop'];
    const victim = await newContext(env.browser);
    const attacker = await newContext(env.browser);
    const problems = [];
    try {
      const app = await enrolApp(victim, target);
      const callbacks = env.callback.hits.length;

      // The attacker signs in with its own account, which has no factor: the set-up page
      // shows a key S; then it posts the victim's password on the same request (refused: the
      // request is bound to the attacker's account), switches account as the pages allow, signs
      // in with the victim's password, and posts a code of S on the victim's request and on its
      // own.
      const page = await attacker.newPage();
      await open(page, transfers);
      await signIn(page, bob);
      const s = (await page.textContent('#totp-secret')).replace(/\s+/g, '');
      const own = await pendingForm(page);
      const relogin = await postFromPage(page, { ...own, action: 'login', username: target.username, password: target.password });
      if (!(relogin >= 400 && relogin < 500)) problems.push(`the victim's password posted on the attacker's request: ${relogin}, not refused`);
      await postFromPage(page, { ...own, action: 'consent', decision: 'switch' });
      await signIn(page, target);
      const victims = await pendingForm(page);
      for (const [what, form] of [['the victim\'s request', victims], ['the attacker\'s request', own]]) {
        const status = await postFromPage(page, { ...form, action: 'totp_enroll', code: totpCode(s) });
        if (await showsRecoveryCodes(page)) problems.push(`recovery codes were shown to the attacker for its key on ${what}`);
        if (await onConsent(page) || !(status >= 400 && status < 500 || status === 200)) problems.push(`totp_enroll of the attacker's key on ${what}: ${status}, not refused`);
        await postWithCookies(attacker, { ...form, action: 'continue' });
        const allow = await postWithCookies(attacker, { ...form, action: 'consent', decision: 'allow' });
        if (allow.code) problems.push(`a code was issued to the victim's password and the attacker's key on ${what}: ${await tokenOf(allow.code)}`);
      }
      if (env.callback.hits.length !== callbacks) problems.push('the client received a redirect from the attacker\'s pages');

      await ownAppStillWorks(victim, target, app, problems);
      assert.deepEqual(problems, []);
    } finally {
      await attacker.close();
      await victim.close();
    }
  });
});
