// passkey.js: the pages' only script. It runs the WebAuthn ceremony of a form marked
// data-passkey ("get": sign in or confirm with a passkey; "create": add one) with the options
// the server put in data-options, and posts the browser's answer in the form's credential
// field. Without WebAuthn in the browser the form stays hidden and the page works without it.
(() => {
  'use strict';
  const b64u = {
    decode(s) {
      const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/'));
      return Uint8Array.from(bin, (c) => c.charCodeAt(0)).buffer;
    },
    encode(buf) {
      let bin = '';
      for (const b of new Uint8Array(buf)) bin += String.fromCharCode(b);
      return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    },
  };
  const ids = (list) => (list || []).map((c) => ({ ...c, id: b64u.decode(c.id) }));

  // publicKey turns the server's JSON options into what navigator.credentials takes.
  function publicKey(mode, options) {
    const pk = { ...options.publicKey, challenge: b64u.decode(options.publicKey.challenge) };
    if (mode === 'create') {
      pk.user = { ...pk.user, id: b64u.decode(pk.user.id) };
      pk.excludeCredentials = ids(pk.excludeCredentials);
    } else {
      pk.allowCredentials = ids(pk.allowCredentials);
    }
    return pk;
  }

  // answer is the credential as JSON (WebAuthn Level 3 toJSON, written out for older browsers).
  function answer(cred) {
    const r = cred.response;
    const response = { clientDataJSON: b64u.encode(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = b64u.encode(r.attestationObject);
      if (r.getTransports) response.transports = r.getTransports();
    } else {
      response.authenticatorData = b64u.encode(r.authenticatorData);
      response.signature = b64u.encode(r.signature);
      if (r.userHandle) response.userHandle = b64u.encode(r.userHandle);
    }
    return JSON.stringify({
      id: cred.id, rawId: b64u.encode(cred.rawId), type: cred.type, response,
      authenticatorAttachment: cred.authenticatorAttachment || undefined,
      clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
    });
  }

  function setUp(form) {
    const mode = form.dataset.passkey;
    const options = JSON.parse(form.dataset.options);
    const button = form.querySelector('[data-passkey-start]');
    const error = form.querySelector('[data-passkey-error]');
    let pending = null;
    const run = async (mediation) => {
      if (pending) pending.abort();
      const ctl = new AbortController();
      pending = ctl;
      const req = { publicKey: publicKey(mode, options), signal: ctl.signal };
      if (mediation) req.mediation = mediation;
      try {
        const cred = mode === 'create' ? await navigator.credentials.create(req) : await navigator.credentials.get(req);
        if (!cred) return;
        form.elements.credential.value = answer(cred);
        form.submit();
      } catch (e) {
        if (e.name !== 'AbortError') error.hidden = false;
      }
    };
    button.addEventListener('click', () => { error.hidden = true; run(null); });
    form.hidden = false;
    // On the login page, offer the user's passkeys in the username field's autofill too.
    if (mode === 'get' && form.elements.action.value === 'passkey_login' && PublicKeyCredential.isConditionalMediationAvailable) {
      PublicKeyCredential.isConditionalMediationAvailable().then((ok) => { if (ok) run('conditional'); });
    }
  }

  if (window.PublicKeyCredential) {
    for (const form of document.querySelectorAll('form[data-passkey]')) setUp(form);
  }
})();
