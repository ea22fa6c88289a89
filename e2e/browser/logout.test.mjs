// Browser tests of the end-session endpoint (OpenID RP-Initiated Logout 1.0): in Chromium on
// the local server, the app sends the signed-in customer to the logout with its id_token as
// hint; the confirmation page ("Sign out of Acme Bank?") is axe-clean in English and French at
// a phone's and a desktop's width; confirming sends the browser back to the registered
// post_logout_redirect_uri with state, and the next authorization asks for the login again.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  PREFIX, alice, client, exchange, newContext, openAuthorize, runAxe, screenshot, setup, signIn, signedOutURI, submit,
} from './lib/harness.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.teardown(); });

const devices = {
  phone: { viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true },
  desktop: { viewport: { width: 1280, height: 900 } },
};

describe('the end-session endpoint in a real browser', () => {
  for (const lang of ['en', 'fr']) {
    for (const [device, options] of Object.entries(devices)) {
      it(`asks before signing out, in ${lang} on a ${device}, axe-clean, and returns with state`, async () => {
        const ctx = await newContext(env.browser, { ...options, locale: lang === 'fr' ? 'fr-FR' : 'en-GB' });
        try {
          const page = await ctx.newPage();
          await openAuthorize(env, page, { ui_locales: lang });
          await signIn(page, alice);
          const redirect = env.callback.redirectURI;
          await Promise.all([
            page.waitForURL((u) => u.href.startsWith(redirect)),
            page.click('button[name=decision][value=allow]'),
          ]);
          const { status, body } = await exchange(env, new URL(page.url()).searchParams.get('code'));
          assert.equal(status, 200);
          const back = signedOutURI(redirect);
          const q = new URLSearchParams({ id_token_hint: body.id_token, post_logout_redirect_uri: back, state: `bye-${lang}`, ui_locales: lang });
          const resp = await page.goto(`${env.server.base}${PREFIX}/logout?${q}`);
          assert.equal(resp.status(), 200, 'the logout request is accepted');
          assert.equal(await page.getAttribute('html', 'lang'), lang);
          assert.match(await page.textContent('h1'), lang === 'fr' ? /Se déconnecter d'Acme Banque/ : /Sign out of Acme Bank/);
          assert.match(await page.textContent('.lead'), new RegExp(client.name), 'the page names the app that asks');
          await screenshot(page, `logout-${lang}-${device}`);
          assert.deepEqual(await runAxe(page), [], 'the confirmation page is axe-clean');
          const { scroll, width } = await page.evaluate(() => ({
            scroll: document.documentElement.scrollWidth, width: document.documentElement.clientWidth }));
          assert.ok(scroll <= width, `the page is ${scroll} px wide in a ${width} px window`);
          await Promise.all([
            page.waitForURL((u) => u.href.startsWith(back)),
            page.click('button[name=action][value=logout]'),
          ]);
          assert.equal(new URL(page.url()).searchParams.get('state'), `bye-${lang}`);
          assert.deepEqual(ctx.cspViolations, [], 'no Content-Security-Policy violation (form-action allows the return)');
          await openAuthorize(env, page, { ui_locales: lang });
          assert.ok(await page.$('#password'), 'after the logout, the authorization asks for the login again');
        } finally {
          await ctx.close();
        }
      });
    }
  }

  it('shows the signed-out page, axe-clean, when no return address is given', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await ctx.newPage();
      await openAuthorize(env, page, {});
      await signIn(page, alice);
      await page.goto(`${env.server.base}${PREFIX}/logout?client_id=${client.client_id}`);
      await submit(page, 'button[name=action][value=logout]');
      assert.match(await page.textContent('h1'), /You are signed out/);
      await screenshot(page, 'logout-done');
      assert.deepEqual(await runAxe(page), [], 'the signed-out page is axe-clean');
    } finally {
      await ctx.close();
    }
  });
});
