// The syncmedic incident page: polls the incident API and renders open (and recent) incidents. No dependencies.
(function () {
  'use strict';
  var api = '../api/v1/incidents';
  var pollMillis = 5000;
  var tokenKey = 'syncmedic.token';
  var state = 'open';
  var timer = null;

  // A token in the URL fragment (#token=...) is moved to this tab's session storage and removed from the address bar;
  // the fragment is never sent to a server.
  var m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(tokenKey, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }

  function age(iso) {
    if (!iso) return '';
    var s = Math.max(0, Math.floor((Date.now() - Date.parse(iso)) / 1000));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + (s % 60 ? (s % 60) + 's' : '');
    if (s < 172800) return Math.floor(s / 3600) + 'h' + (Math.floor(s / 60) % 60 ? (Math.floor(s / 60) % 60) + 'm' : '');
    return Math.floor(s / 86400) + 'd';
  }

  function objectName(o) {
    return o.kind + (o.group ? '.' + o.group : '') + '/' + (o.namespace ? o.namespace + '/' : '') + o.name;
  }

  function section(title, body) { return body ? [el('h3', {}, [title]), body] : []; }

  function evidence(inc) {
    if (!inc.evidence.length) return null;
    return el('table', { 'class': 'evidence' }, inc.evidence.map(function (e) {
      return el('tr', {}, [el('td', { 'class': 'field' }, [e.field]),
        el('td', {}, [e.value + (e.since ? ' (' + age(e.since) + ' ago)' : '')])]);
    }));
  }

  function remedy(inc) {
    var r = inc.remedy;
    var parts = [el('p', {}, [r.description || 'No automatic remedy: see the evidence.'])];
    if (r.action) parts.push(el('p', { 'class': 'meta' }, ['action ' + r.action + (inc.auto ? ' — applied automatically' : ' — not automatic under the policy') + (r.rerunsHooks ? '; re-runs the hooks' : '')]));
    r.commands.forEach(function (c) { parts.push(el('pre', {}, [c])); });
    return el('div', { 'class': 'remedy' }, parts);
  }

  function attempts(inc) {
    if (!inc.attempts.length) return null;
    return el('table', { 'class': 'attempts' }, inc.attempts.map(function (a) {
      return el('tr', {}, [el('td', { 'class': 'field' }, [new Date(a.at).toLocaleString()]),
        el('td', {}, [a.action + ': ' + a.result + (a.error ? ' — ' + a.error : a.reason ? ' — ' + a.reason : '')])]);
    }));
  }

  function timeline(inc) {
    return el('ol', { 'class': 'timeline' }, inc.timeline.map(function (t) {
      return el('li', {}, [el('span', {}, [new Date(t.at).toLocaleString()]), t.kind + ': ' + t.text]);
    }));
  }

  function card(inc) {
    var where = objectName(inc.object);
    if (inc.app) where += ' · Argo CD app ' + (inc.app.namespace ? inc.app.namespace + '/' : '') + inc.app.name + (inc.app.project ? ' (project ' + inc.app.project + ')' : '');
    if (inc.fluxOwner) where += ' · applied by ' + inc.fluxOwner;
    var links = inc.links.filter(function (l) { return /^https?:\/\//.test(l.url); })
      .map(function (l) { return el('a', { href: l.url, rel: 'noreferrer' }, [l.title]); });
    return el('article', { 'class': 'incident ' + inc.state, id: 'incident-' + inc.id }, [
      el('h2', {}, [el('span', { 'class': 'badge ' + inc.state }, [inc.state]), el('span', { 'class': 'badge ' + inc.severity }, [inc.severity]), inc.title]),
      el('div', { 'class': 'meta' }, [inc.rule + ' · ' + where + ' · open ' + age(inc.openedAt) + (inc.resolvedAt ? ' · resolved ' + age(inc.resolvedAt) + ' ago' : '')]),
      el('p', { 'class': 'summary' }, [inc.summary]),
      el('div', { 'class': 'cols' }, [
        el('div', {}, section('Evidence', evidence(inc)).concat(section('Advisories', inc.advisories.length ? el('ul', {}, inc.advisories.map(function (a) { return el('li', {}, [a]); })) : null))),
        el('div', {}, section('Fix', remedy(inc)).concat(section('Attempts', attempts(inc))).concat(section('Timeline', timeline(inc))).concat(links.length ? [el('p', {}, links)] : []))
      ])
    ]);
  }

  function render(list) {
    var main = document.getElementById('incidents');
    main.textContent = '';
    if (!list.items.length) {
      main.appendChild(el('p', { 'class': 'empty' }, [state === 'open' ? 'No open incidents.' : 'No incidents.']));
      return;
    }
    list.items.forEach(function (inc) { main.appendChild(card(inc)); });
  }

  function setStatus(text) { document.getElementById('status').textContent = text; }

  function poll() {
    clearTimeout(timer);
    var token = sessionStorage.getItem(tokenKey);
    if (!token) {
      document.getElementById('login').hidden = false;
      return;
    }
    fetch(api + '?state=' + state, { headers: { Authorization: 'Bearer ' + token }, cache: 'no-store' })
      .then(function (res) {
        if (res.status === 401) {
          sessionStorage.removeItem(tokenKey);
          document.getElementById('login').hidden = false;
          throw new Error('the token was refused');
        }
        if (!res.ok) throw new Error('HTTP ' + res.status);
        return res.json();
      })
      .then(function (list) {
        document.getElementById('login').hidden = true;
        render(list);
        setStatus(list.items.length + ' shown · updated ' + new Date().toLocaleTimeString());
      })
      .catch(function (err) { setStatus('not updated: ' + err.message); })
      .then(function () { timer = setTimeout(poll, pollMillis); });
  }

  document.getElementById('login').addEventListener('submit', function (e) {
    e.preventDefault();
    sessionStorage.setItem(tokenKey, document.getElementById('token').value.trim());
    poll();
  });
  Array.prototype.forEach.call(document.querySelectorAll('input[name=state]'), function (r) {
    r.addEventListener('change', function () { state = r.value; poll(); });
  });
  poll();
})();
