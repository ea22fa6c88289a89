// Browser tests of the pages a bank customer sees: the whole authorization code flow in
// Chromium on the local server, the refusals, French, the keyboard alone, a 320 px screen, and
// axe-core on every page. Run with `npm test` (node's built-in test runner).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  alice, authorizeURL, bob, client, exchange, newContext, runAxe, screenshot, setup,
} from './lib/harness.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.teardown(); });

/** open starts an authorization request in a new page of ctx and waits for the login form. */
async function open(ctx, params) {
  const page = await ctx.newPage();
  const resp = await page.goto(authorizeURL(env, params));
  assert.equal(resp.status(), 200, 'the authorization request is accepted');
  await page.waitForSelector('#username');
  return page;
}

async function signIn(page, user, password = user.password) {
  await page.fill('#username', user.username);
  await page.fill('#password', password);
  await Promise.all([page.waitForEvent('load'), page.click('form button[type=submit]')]);
}

/** decide presses Allow or Deny and returns the URL the browser lands on at the client. */
async function decide(page, decision) {
  const redirect = env.callback.redirectURI;
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(redirect)),
    page.click(`button[name=decision][value=${decision}]`),
  ]);
  return new URL(page.url());
}

/** describedText is the text of the elements an input's aria-describedby names. */
function describedText(page, selector) {
  return page.$eval(selector, (el) => (el.getAttribute('aria-describedby') || '').split(/\s+/)
    .filter(Boolean).map((id) => document.getElementById(id)?.textContent.trim() ?? `<missing #${id}>`).join(' | '));
}

function assertNoCSPViolations(ctx) {
  assert.deepEqual(ctx.cspViolations, [], 'the pages cause no Content-Security-Policy violation');
  assert.deepEqual(ctx.externalRequests, [], 'the pages load nothing from elsewhere');
}

describe('the authorization code flow in a real browser', () => {
  it('signs in, consents and lands on the redirect URI with a code the client can exchange', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await open(ctx, { state: 'state-allow' });
      assert.match(await page.textContent('h1'), /Sign in/);
      assert.match(await page.textContent('.lead'), new RegExp(client.name));
      await signIn(page, alice);
      assert.match(await page.textContent('h1'), new RegExp(`Allow ${client.name}`), 'the consent page names the application');
      assert.match(await page.textContent('.who'), new RegExp(alice.name), 'the signed-in user is shown');
      assert.ok(await page.$('button[name=decision][value=switch]'), 'there is a way to switch account');
      const logo = await page.$eval('img.logo', (img) => ({ src: img.getAttribute('src'), ok: img.complete && img.naturalWidth > 0 }));
      assert.deepEqual(logo, { src: client.logo_uri, ok: true }, 'the registered logo is shown');
      const scopes = await page.$$eval('.scope', (els) => els.map((el) => ({ text: el.innerText, money: el.classList.contains('money') })));
      assert.equal(scopes.length, 3, 'one line per requested scope');
      assert.equal(scopes.filter((s) => s.money).length, 0, 'no scope that moves money (sca.test.mjs has the transfers scope)');
      const hits = env.callback.hits.length;
      const landed = await decide(page, 'allow');
      assert.equal(landed.origin + landed.pathname, env.callback.redirectURI);
      assert.equal(landed.searchParams.get('state'), 'state-allow');
      assert.equal(landed.searchParams.get('error'), null);
      const code = landed.searchParams.get('code');
      assert.ok(code, 'the redirect carries a code');
      assert.equal(env.callback.hits.length, hits + 1, 'the client received the redirect');
      const { status, body } = await exchange(env, code);
      assert.equal(status, 200, `token endpoint answered ${JSON.stringify(body)}`);
      assert.ok(body.access_token && body.id_token, 'the code is exchanged for tokens');
      assert.equal(body.scope, 'openid email profile');
      assertNoCSPViolations(ctx);
    } finally {
      await ctx.close();
    }
  });

  it('denies: the client gets error=access_denied with its state, and no code', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await open(ctx, { state: 'state-deny' });
      await signIn(page, alice);
      const landed = await decide(page, 'deny');
      assert.equal(landed.searchParams.get('error'), 'access_denied');
      assert.equal(landed.searchParams.get('state'), 'state-deny');
      assert.equal(landed.searchParams.get('code'), null);
      assertNoCSPViolations(ctx);
    } finally {
      await ctx.close();
    }
  });

  it('switches account from the consent page and consents as the other user', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await open(ctx);
      await signIn(page, alice);
      await Promise.all([page.waitForEvent('load'), page.click('button[name=decision][value=switch]')]);
      assert.ok(await page.$('#password'), 'the login page is shown again');
      await signIn(page, bob);
      assert.match(await page.textContent('.who'), new RegExp(bob.name));
      const landed = await decide(page, 'allow');
      assert.ok(landed.searchParams.get('code'));
    } finally {
      await ctx.close();
    }
  });
});

describe('errors on the login form', () => {
  it('a wrong password gets one generic message, tied to the fields, and the same as an unknown user', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await open(ctx);
      await signIn(page, bob, 'not-the-password');
      const alert = (await page.textContent('[role=alert]')).trim();
      assert.match(alert, /username or password is incorrect/);
      assert.equal(await page.getAttribute('#password', 'aria-invalid'), 'true');
      assert.match(await describedText(page, '#password'), /username or password is incorrect/, 'the error is tied to the password field');
      assert.match(await describedText(page, '#username'), /username or password is incorrect/, 'and to the username field');
      assert.equal(await page.inputValue('#username'), bob.username, 'the username is kept');
      assert.equal(await page.inputValue('#password'), '', 'the password is not sent back');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'password', 'the cursor waits in the password field');
      assert.match(await page.title(), /^Error: /);

      await signIn(page, { username: 'nobody-here', password: 'whatever-it-is' });
      assert.equal((await page.textContent('[role=alert]')).trim(), alert, 'an unknown user reads exactly the same message');

      // The right password still works from the error page.
      await signIn(page, bob);
      assert.ok(await page.$('button[name=decision][value=allow]'));
      assertNoCSPViolations(ctx);
    } finally {
      await ctx.close();
    }
  });

  it('an empty password is named next to the password field', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await open(ctx);
      await signIn(page, alice, '');
      assert.equal(await page.getAttribute('#password', 'aria-invalid'), 'true');
      assert.equal(await page.getAttribute('#username', 'aria-invalid'), null, 'the username is not blamed');
      assert.equal(await describedText(page, '#password'), 'Enter your password.');
    } finally {
      await ctx.close();
    }
  });
});

describe('language', () => {
  it('speaks French when ui_locales asks for it, through login and consent', async () => {
    const ctx = await newContext(env.browser, { locale: 'en-US' });
    try {
      const page = await open(ctx, { ui_locales: 'fr-FR en' });
      assert.equal(await page.getAttribute('html', 'lang'), 'fr');
      assert.equal((await page.textContent('h1')).trim(), 'Connexion à votre banque');
      assert.equal((await page.textContent('label[for=password]')).trim(), 'Mot de passe');
      await signIn(page, alice, 'mauvais-mot-de-passe');
      assert.match(await page.textContent('[role=alert]'), /identifiant ou le mot de passe est incorrect/);
      await signIn(page, alice);
      assert.match(await page.textContent('h1'), new RegExp(`Autoriser ${client.name}`));
      assert.equal((await page.textContent('button[value=allow]')).trim(), 'Autoriser');
      assert.equal((await page.textContent('button[value=deny]')).trim(), 'Refuser');
      await screenshot(page, 'consent-fr-desktop');
    } finally {
      await ctx.close();
    }
  });

  it('falls back to the browser language, then English', async () => {
    for (const [locale, heading] of [['fr-FR', 'Connexion à votre banque'], ['de-DE', 'Sign in to your bank']]) {
      const ctx = await newContext(env.browser, { locale });
      try {
        const page = await open(ctx);
        assert.equal((await page.textContent('h1')).trim(), heading, `browser language ${locale}`);
      } finally {
        await ctx.close();
      }
    }
  });
});

describe('keyboard and small screens', () => {
  it('signs in and consents with the keyboard alone, with focus always visible', async () => {
    const ctx = await newContext(env.browser);
    try {
      const page = await open(ctx, { state: 'state-keys' });
      const focused = () => page.evaluate(() => {
        const el = document.activeElement;
        const s = getComputedStyle(el);
        return { id: el.id, value: el.getAttribute('value'), tag: el.tagName,
          visible: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2 };
      });
      assert.equal((await focused()).id, 'username', 'the cursor starts in the username field');
      await page.keyboard.type(alice.username);
      await page.keyboard.press('Tab');
      const f = await focused();
      assert.deepEqual([f.id, f.visible], ['password', true], 'Tab reaches the password with a visible focus');
      await page.keyboard.type(alice.password);
      await page.keyboard.press('Tab');
      const submit = await focused();
      assert.deepEqual([submit.tag, submit.visible], ['BUTTON', true], 'Tab reaches Sign in with a visible focus');
      await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
      await page.waitForSelector('button[value=allow]');

      const order = [];
      for (let i = 0; i < 10 && order.at(-1) !== 'allow'; i++) {
        await page.keyboard.press('Tab');
        const el = await focused();
        assert.ok(el.visible, `focus is visible on ${el.tag} ${el.value ?? el.id}`);
        order.push(el.value ?? el.id);
      }
      assert.deepEqual(order.filter((v) => ['switch', 'deny', 'allow'].includes(v)), ['switch', 'deny', 'allow'],
        'Tab visits switch account, Deny, then Allow');
      const redirect = env.callback.redirectURI;
      await Promise.all([page.waitForURL((u) => u.href.startsWith(redirect)), page.keyboard.press('Enter')]);
      const landed = new URL(page.url());
      assert.ok(landed.searchParams.get('code'));
      assert.equal(landed.searchParams.get('state'), 'state-keys');
    } finally {
      await ctx.close();
    }
  });

  it('fits a 320 px screen without horizontal scrolling, with Allow and Deny of equal size', async () => {
    const ctx = await newContext(env.browser, { viewport: { width: 320, height: 640 } });
    try {
      const noScroll = async (what) => {
        const { scroll, client: width } = await page.evaluate(() => ({
          scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
        assert.ok(scroll <= width, `${what}: content is ${scroll} px wide in a ${width} px window`);
      };
      const page = await open(ctx);
      await noScroll('login');
      await signIn(page, alice, 'wrong-password-here');
      await noScroll('login with an error');
      await signIn(page, alice);
      await noScroll('consent');
      const [deny, allow] = await Promise.all(['deny', 'allow'].map((v) => page.$eval(`button[value=${v}]`, (b) => {
        const r = b.getBoundingClientRect();
        const s = getComputedStyle(b);
        return { w: Math.round(r.width), h: Math.round(r.height), bg: s.backgroundColor, color: s.color, font: s.fontWeight };
      })));
      assert.deepEqual(deny, allow, 'Allow and Deny carry equal weight');
      await page.goto(`${env.server.base}/v2/authentication/oauth2/authorize?client_id=nobody`);
      await noScroll('error');
    } finally {
      await ctx.close();
    }
  });
});

describe('accessibility (axe-core) and screenshots', () => {
  // Each page at phone and desktop width; axe runs on each, and any serious or critical
  // violation fails the test. bypassCSP lets the test inject axe; the flow tests above run
  // under the real policy.
  const widths = { phone: { width: 375, height: 812 }, desktop: { width: 1280, height: 900 } };
  for (const [device, viewport] of Object.entries(widths)) {
    it(`login, login error, consent and error pages pass axe at ${device} width`, async () => {
      const ctx = await newContext(env.browser, { viewport, bypassCSP: true });
      const found = [];
      const check = async (page, name) => {
        await screenshot(page, `${name}-${device}`);
        for (const v of await runAxe(page)) found.push(`${name}: ${v}`);
      };
      try {
        const page = await open(ctx);
        await check(page, 'login');
        await signIn(page, alice, '');
        await check(page, 'login-missing');
        await signIn(page, alice, 'wrong-password-here');
        await check(page, 'login-error');
        await signIn(page, alice);
        await check(page, 'consent');
        await page.goto(`${env.server.base}/v2/authentication/oauth2/authorize?client_id=nobody&redirect_uri=https://evil.example/`);
        await check(page, 'error');
      } finally {
        await ctx.close();
      }
      const frCtx = await newContext(env.browser, { viewport, bypassCSP: true });
      try {
        const fr = await open(frCtx, { ui_locales: 'fr' });
        await check(fr, 'login-fr');
        await signIn(fr, alice);
        await check(fr, 'consent-fr');
      } finally {
        await frCtx.close();
      }
      assert.deepEqual(found, [], 'no serious or critical accessibility violation');
    });
  }
});

describe('the consent page says what is asked (authorization_details)', () => {
  // A payment whose payee's name holds markup, and an account-information grant: the page
  // lists each in words, in the page's language, with the accounts masked, and passes axe at a
  // phone's and a desktop's size.
  const details = [
    {
      type: 'payment_initiation', instructedAmount: { currency: 'EUR', amount: '1234.56' },
      creditorName: 'Evil <b>Corp</b> & Co', creditorAccount: { iban: 'DE89370400440532013000' },
      remittanceInformationUnstructured: 'Invoice 2026-117', requestedExecutionDate: '2027-03-15',
    },
    {
      type: 'account_information', permissions: ['balances', 'transactions'],
      accounts: [{ iban: 'FR7630006000011234567890189' }], expirationDate: '2027-02-28',
    },
  ];
  const expected = {
    en: {
      headings: ['Payment to authorize', 'Access to your account information'],
      rows: [
        ['Amount', ['€1,234.56']], ['Payee', ['Evil <b>Corp</b> & Co']], ["Payee's account", ['DE89 •••• •••• 3000']],
        ['Reference', ['Invoice 2026-117']], ['Payment date', ['March 15, 2027']],
        ['What it can see', ['Balances', 'Transactions']], ['Accounts', ['FR76 •••• •••• 0189']], ['Until', ['February 28, 2027']],
      ],
    },
    fr: {
      headings: ['Paiement à autoriser', 'Accès aux informations de vos comptes'],
      rows: [
        ['Montant', ['1\u00a0234,56\u00a0€']], ['Bénéficiaire', ['Evil <b>Corp</b> & Co']], ['Compte du bénéficiaire', ['DE89 •••• •••• 3000']],
        ['Référence', ['Invoice 2026-117']], ['Date du paiement', ['15 mars 2027']],
        ['Ce qu\'elle pourra consulter', ['Soldes', 'Opérations']], ['Comptes', ['FR76 •••• •••• 0189']], ['Jusqu\'au', ['28 février 2027']],
      ],
    },
  };
  const sizes = { phone: { width: 375, height: 667 }, desktop: { width: 1280, height: 800 } };
  for (const [device, viewport] of Object.entries(sizes)) {
    it(`lists amount, payee, masked account, reference and dates in en and fr, axe-clean at ${device} size`, async () => {
      const found = [];
      for (const lang of ['en', 'fr']) {
        const ctx = await newContext(env.browser, { viewport, bypassCSP: true });
        try {
          const page = await open(ctx, { scope: 'openid', ui_locales: lang, authorization_details: JSON.stringify(details) });
          await signIn(page, alice);
          const want = expected[lang];
          assert.deepEqual(await page.$$eval('section.detail h2', (hs) => hs.map((h) => h.textContent.trim())), want.headings,
            'a heading per detail');
          const rows = await page.$$eval('section.detail dl .row', (rs) => rs.map((r) => [
            r.querySelector('dt').textContent.trim(), [...r.querySelectorAll('dd')].map((d) => d.textContent.trim())]));
          assert.deepEqual(rows, want.rows, 'each value under its label');
          assert.equal(await page.$('section.detail dd b'), null, 'markup in the payee\'s name is shown as text');
          const text = await page.textContent('body');
          for (const full of ['DE89370400440532013000', 'FR7630006000011234567890189']) {
            assert.ok(!text.includes(full), `the account ${full} is shown unmasked`);
          }
          const { scroll, width } = await page.evaluate(() => ({
            scroll: document.documentElement.scrollWidth, width: document.documentElement.clientWidth }));
          assert.ok(scroll <= width, `the page is ${scroll} px wide in a ${width} px window`);
          await screenshot(page, `consent-details-${lang}-${device}`);
          for (const v of await runAxe(page)) found.push(`${lang}: ${v}`);
        } finally {
          await ctx.close();
        }
      }
      assert.deepEqual(found, [], 'no serious or critical accessibility violation');
    });
  }
});

describe('the Connected apps page', () => {
  // Signed out, the page says to sign in; after alice allowed the app an account-information
  // grant, it lists the app with what it can do and the details in words (accounts masked),
  // and its withdraw button ends the grant: the page comes back saying so, without it. Each app
  // has a link, named for the app, that downloads its signed consent receipt (application/jwt,
  // an attachment). In en and fr, axe-clean at a phone's and a desktop's size, no horizontal
  // scrolling.
  const details = [{ type: 'account_information', permissions: ['balances'], accounts: [{ iban: 'FR7630006000011234567890189' }] }];
  const words = {
    en: { signedOut: /Sign in to see your connected apps/, title: 'Connected apps', perms: 'Balances', withdrawn: /Access withdrawn/, receipt: 'Download consent receipt for' },
    fr: { signedOut: /Connectez-vous pour voir vos applications connectées/, title: 'Applications connectées', perms: 'Soldes', withdrawn: /Accès retiré/, receipt: 'Télécharger le reçu de consentement de' },
  };
  const sizes = { phone: { width: 375, height: 667 }, desktop: { width: 1280, height: 800 } };
  for (const [device, viewport] of Object.entries(sizes)) {
    it(`lists the apps with their details and withdraws one, en and fr, axe-clean at ${device} size`, async () => {
      const found = [];
      for (const lang of ['en', 'fr']) {
        const ctx = await newContext(env.browser, { viewport, bypassCSP: true });
        const apps = `${env.server.base}/v2/authentication/oauth2/account/apps?ui_locales=${lang}`;
        const w = words[lang];
        try {
          const page = await ctx.newPage();
          assert.equal((await page.goto(apps)).status(), 200, 'the page answers without a session');
          assert.match(await page.textContent('h1'), w.signedOut);
          assert.equal(await page.$('form'), null, 'no withdraw form without a session');
          await screenshot(page, `apps-signedout-${lang}-${device}`);
          for (const v of await runAxe(page)) found.push(`${lang} signed out: ${v}`);

          const auth = await open(ctx, { scope: 'openid', ui_locales: lang, authorization_details: JSON.stringify(details) });
          await signIn(auth, alice);
          const code = (await decide(auth, 'allow')).searchParams.get('code');
          assert.equal((await exchange(env, code)).status, 200, 'the code is exchanged: the grant exists');

          assert.equal((await page.goto(apps)).status(), 200);
          assert.equal((await page.textContent('h1')).trim(), w.title);
          const sections = await page.$$eval('section.connected', (ss) => ss.map((s) => ({
            id: s.querySelector('input[name=grant_id]').value, name: s.querySelector('h2').textContent.trim(), text: s.innerText })));
          assert.ok(sections.length >= 1, 'the app is listed');
          const mine = sections[0];
          assert.equal(mine.name, client.name, 'newest first, by the app\'s name');
          assert.ok(mine.text.includes(w.perms) && mine.text.includes('FR76 •••• •••• 0189'), `the details in words: ${mine.text}`);
          assert.ok(!(await page.textContent('body')).includes('FR7630006000011234567890189'), 'the account is masked');
          const link = page.getByRole('link', { name: `${w.receipt} ${client.name}` });
          assert.equal(await link.count(), sections.length, 'each listed app has its receipt link, named for the app');
          const href = await page.$eval(`section.connected:has(input[value="${mine.id}"]) a.receipt`, (a) => a.href);
          assert.ok(new URL(href).searchParams.get('grant') === mine.id, `the link names the grant: ${href}`);
          const dl = await page.request.get(href);
          assert.equal(dl.status(), 200, 'the receipt downloads in the session');
          assert.equal(dl.headers()['content-type'], 'application/jwt');
          assert.match(dl.headers()['content-disposition'], new RegExp(`^attachment; filename=.*${mine.id}`));
          assert.equal((await dl.text()).split('.').length, 3, 'a compact JWS');
          const { scroll, width } = await page.evaluate(() => ({
            scroll: document.documentElement.scrollWidth, width: document.documentElement.clientWidth }));
          assert.ok(scroll <= width, `the page is ${scroll} px wide in a ${width} px window`);
          await screenshot(page, `apps-${lang}-${device}`);
          for (const v of await runAxe(page)) found.push(`${lang} list: ${v}`);

          await Promise.all([page.waitForEvent('load'), page.click(`section.connected:has(input[value="${mine.id}"]) button[value=withdraw]`)]);
          assert.match(page.url(), /withdrawn=/, 'back on the page after the withdrawal');
          assert.match(await page.textContent('[role=status]'), w.withdrawn);
          assert.equal(await page.$(`input[name=grant_id][value="${mine.id}"]`), null, 'the withdrawn grant is no longer listed');
          for (const v of await runAxe(page)) found.push(`${lang} withdrawn: ${v}`);
        } finally {
          await ctx.close();
        }
      }
      assert.deepEqual(found, [], 'no serious or critical accessibility violation');
    });
  }
});

describe('hygiene', () => {
  it('the server logs no password', () => {
    const log = env.server.log();
    assert.ok(log.length > 0, 'the server logged something');
    for (const secret of [alice.password, bob.password, client.client_secret]) {
      assert.ok(!log.includes(secret), 'a secret appears in the server log');
    }
  });
});
