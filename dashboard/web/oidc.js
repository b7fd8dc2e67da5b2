// nofly dashboard: single sign-on (loaded after app.js; uses window.nofly's
// extension points). When the alerter signs people in through an OpenID
// Connect provider (GET /auth/config), the sign-in pane offers "Sign in
// with <provider>" beside the token field; once signed in, the page sends
// the session cookie (the browser does) and app.js adds X-CSRF-Token to
// every request, and the header's button is "Sign out", which ends the
// session here and, when the provider has an end_session_endpoint, there.
'use strict';
(() => {
  const nofly = window.nofly;
  if (!nofly || !nofly.on) return;
  const $ = (id) => document.getElementById(id);

  async function config() {
    try {
      const res = await fetch('auth/config', { cache: 'no-store', credentials: 'same-origin' });
      return res.ok ? await res.json() : null;
    } catch (e) {
      return null;
    }
  }

  function offerSignIn(cfg) {
    const form = $('tokenForm');
    if (!form || $('oidcSignIn')) return;
    const box = document.createElement('div');
    box.className = 'oidc';
    const a = document.createElement('a');
    a.id = 'oidcSignIn';
    a.className = 'button';
    a.href = cfg.login || 'auth/login';
    a.textContent = 'Sign in with ' + (cfg.provider || 'your organisation');
    box.append(a);
    const title = $('tokenTitle');
    title.after(box);
    const hint = form.querySelector('p:not(.error)');
    if (cfg.tokens) {
      if (hint) hint.textContent = 'Or, for a machine or a shared desk, an API token (from alerter api-token), kept for this tab only:';
    } else {
      // No token file: the sign-in is the only way.
      if (hint) hint.hidden = true;
      const input = $('token');
      input.required = false;
      input.closest('label').hidden = true;
      form.querySelector('button[type=submit]').hidden = true;
    }
  }

  async function signOut(me) {
    const b = $('signout');
    b.disabled = true;
    try {
      const res = await fetch('auth/logout', { method: 'POST', cache: 'no-store', credentials: 'same-origin',
        headers: { 'X-CSRF-Token': me.csrf_token || '' } });
      const body = res.ok ? await res.json() : null;
      if (body && body.logout_url) { location.assign(body.logout_url); return; }
      location.reload();
    } catch (e) {
      b.disabled = false;
      b.title = 'sign-out failed: ' + e.message;
    }
  }

  function signedIn(me) {
    if (!me || me.via !== 'oidc' || !me.csrf_token) return;
    // The button app.js made for the token ("Change token"), without its
    // handler: a person signs out.
    const old = $('signout');
    const b = old.cloneNode(true);
    old.replaceWith(b);
    b.textContent = 'Sign out';
    b.hidden = false;
    b.title = 'End this session (' + me.name + ')';
    b.addEventListener('click', () => signOut(me));
  }

  nofly.on('me', signedIn);
  if (nofly.me && nofly.me()) signedIn(nofly.me());
  config().then((cfg) => { if (cfg && cfg.oidc) offerSignIn(cfg); });
})();
