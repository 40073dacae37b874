// The syncmedic incident page: follows the incident API's live stream (?watch=true, server-sent events read with
// fetch so the bearer token goes along), falls back to polling, and renders open (and recent) incidents. Where the
// policy's fixBy allows, each incident has a Fix button: it asks for the plan (dry-run), shows it, and applies it
// only on confirmation. Where ackBy and silenceBy allow, each open incident has Acknowledge and Silence… (a form with
// the incident's matchers, a duration and a comment), and the active silences are listed with Expire. No
// dependencies.
(function () {
  'use strict';
  var api = '../api/v1/incidents';
  var silencesApi = '../api/v1/silences';
  var oncall = {}; // incident ID -> {busy, error, form: {rule, namespace, kind, app, appNamespace, project, name, duration, comment}}: survives re-renders
  var silences = []; // the silences as last listed
  var pollMillis = 5000;
  var retryMillis = 30000; // how long after the live stream failed it is tried again
  var tokenKey = 'syncmedic.token';
  var state = 'open';
  var retryTimer = null; // the next attempt at the live stream, while it is down
  var pollTimer = null; // the next poll, while the live stream is down
  var stream = null; // the AbortController of the live stream
  var last = null; // the last list rendered
  var lastJSON = ''; // and as JSON
  var fixes = {}; // incident ID -> {busy, plan, result, error}: survives re-renders
  var seen = {}; // incident ID -> the incident as last listed, for the incidents a fix was asked for
  var finals = {}; // incident ID -> the incident as read by ID once it left the list after a fix (false: being read)

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
    var f = fixBox(inc);
    if (f) parts.push(f);
    return el('div', { 'class': 'remedy' }, parts);
  }

  function button(cls, text, onClick, disabled) {
    var b = el('button', { type: 'button', 'class': cls }, [text]);
    if (disabled) b.disabled = true;
    b.addEventListener('click', onClick);
    return b;
  }

  // fixBox is the Fix button, the plan to confirm, or the outcome, for an incident the caller may fix.
  function fixBox(inc) {
    if (!inc.fix) return null;
    var s = fixes[inc.id] || {};
    if (inc.state === 'resolved') return s.result ? el('div', { 'class': 'fix' }, [fixResult(s.result)]) : null;
    if (!inc.fix.allowed) {
      return el('p', { 'class': 'fix-denied meta' }, ['Fix on demand: ' + inc.fix.reason]);
    }
    var parts = [];
    if (s.plan) {
      parts.push(el('p', { 'class': 'fix-title' }, ['syncmedic will apply ' + s.plan.action + ':']));
      parts.push(el('ul', { 'class': 'fix-steps' }, s.plan.steps.map(function (x) { return el('li', {}, [x]); })));
      s.plan.warnings.forEach(function (w) { parts.push(el('p', { 'class': 'fix-warning' }, [w])); });
      parts.push(button('fix-confirm', 'Apply this fix', function () { requestFix(inc.id, s.plan.confirm); }, s.busy));
      parts.push(button('fix-cancel', 'Cancel', function () { fixes[inc.id] = {}; rerender(); }, s.busy));
    } else {
      parts.push(button('fix-plan', 'Fix…', function () { requestFix(inc.id, ''); }, s.busy));
    }
    if (s.result) parts.push(fixResult(s.result));
    if (s.error) parts.push(el('p', { 'class': 'fix-error' }, [s.error]));
    return el('div', { 'class': 'fix' }, parts);
  }

  function fixResult(r) {
    return el('p', { 'class': 'fix-result' }, [r.action + ': ' + r.result + (r.changed ? ' (changed)' : ' (nothing to change)') +
      (r.error ? ' — ' + r.error : '')]);
  }

  // requestFix asks for the plan (confirm empty) or applies the reviewed plan.
  function requestFix(id, confirm) {
    var token = sessionStorage.getItem(tokenKey);
    fixes[id] = Object.assign({}, fixes[id], { busy: true, error: '' });
    rerender();
    fetch(api + '/' + encodeURIComponent(id) + '/fix', {
      method: 'POST', cache: 'no-store',
      headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
      body: JSON.stringify(confirm ? { confirm: confirm } : {})
    })
      .then(function (res) { return res.json().then(function (body) { return { status: res.status, body: body }; }); })
      .then(function (r) {
        if (r.status === 200 && r.body.kind === 'FixPlan') fixes[id] = { plan: r.body };
        else if (r.status === 200) fixes[id] = { result: r.body };
        else if (r.status === 409 && r.body.plan) fixes[id] = { plan: r.body.plan, error: r.body.error };
        else fixes[id] = { error: 'Refused (' + r.status + '): ' + (r.body.error || 'unknown error') };
      })
      .catch(function (err) { fixes[id] = { error: 'The fix request failed: ' + err.message }; })
      .then(function () { rerender(); refresh(); });
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

  // appName names an Argo CD Application as namespace/name (project p).
  function appName(a) {
    return (a.namespace ? a.namespace + '/' : '') + a.name + (a.project ? ' (project ' + a.project + ')' : '');
  }

  function card(inc) {
    var where = objectName(inc.object);
    if (inc.app) where += ' · Argo CD app ' + appName(inc.app);
    // relatedApps: the Applications the incident is also about (those holding an ApplicationSet's stalled rollout).
    if (inc.relatedApps && inc.relatedApps.length) where += ' · also about Argo CD app' + (inc.relatedApps.length > 1 ? 's ' : ' ') + inc.relatedApps.map(appName).join(', ');
    if (inc.fluxOwner) where += ' · applied by ' + inc.fluxOwner;
    var links = inc.links.filter(function (l) { return /^https?:\/\//.test(l.url); })
      .map(function (l) { return el('a', { href: l.url, rel: 'noreferrer' }, [l.title]); });
    return el('article', { 'class': 'incident ' + inc.state, id: 'incident-' + inc.id }, [
      el('h2', {}, [el('span', { 'class': 'badge ' + inc.state }, [inc.state]), el('span', { 'class': 'badge ' + inc.severity }, [inc.severity]), inc.title]),
      el('div', { 'class': 'meta' }, [inc.rule + ' · ' + where + ' · open ' + age(inc.openedAt) + (inc.resolvedAt ? ' · resolved ' + age(inc.resolvedAt) + ' ago' : '')]),
      el('p', { 'class': 'summary' }, [inc.summary]),
      onCallBox(inc),
      el('div', { 'class': 'cols' }, [
        el('div', {}, section('Evidence', evidence(inc)).concat(section('Advisories', inc.advisories.length ? el('ul', {}, inc.advisories.map(function (a) { return el('li', {}, [a]); })) : null))),
        el('div', {}, section('Fix', remedy(inc)).concat(section('Attempts', attempts(inc))).concat(section('Timeline', timeline(inc))).concat(links.length ? [el('p', {}, links)] : []))
      ])
    ]);
  }

  function rerender() { if (last) render(last, true); }

  function authHeaders() {
    return { Authorization: 'Bearer ' + sessionStorage.getItem(tokenKey), 'Content-Type': 'application/json' };
  }

  // owner is the incident's application: the Argo CD Application, or the Flux HelmRelease.
  function owner(inc) {
    if (inc.app) return inc.app.name;
    if (inc.object.kind === 'HelmRelease') return inc.object.name;
    var m = /^HelmRelease\/[^/]*\/(.+)$/.exec(inc.fluxOwner || '');
    return m ? m[1] : '';
  }

  // ownerNamespace is the namespace of owner(inc): the Application's, or the HelmRelease's.
  function ownerNamespace(inc) {
    if (inc.app) return inc.app.namespace || '';
    if (inc.object.kind === 'HelmRelease') return inc.object.namespace || '';
    var m = /^HelmRelease\/([^/]*)\/.+$/.exec(inc.fluxOwner || '');
    return m ? (m[1] || inc.object.namespace || '') : '';
  }

  // onCallBox shows who took the incident and whether a silence mutes it, with the Acknowledge and Silence… buttons
  // the policy allows.
  function onCallBox(inc) {
    var s = oncall[inc.id] || {};
    var parts = [];
    if (inc.ack) {
      parts.push(el('p', { 'class': 'ack' }, ['Acknowledged by ' + inc.ack.by + ' ' + age(inc.ack.at) + ' ago' +
        (inc.ack.takenOverFrom ? ' (taken over from ' + inc.ack.takenOverFrom + ')' : '')]));
    }
    if (inc.silencedBy) {
      parts.push(el('p', { 'class': 'silenced' }, ['Silenced by silence ' + inc.silencedBy +
        (inc.unannounced ? ': not announced yet; it will be if still open when the silence ends' : ': no updates are announced') +
        ', and no automatic remedy while it lasts.']));
    }
    if (inc.state !== 'resolved') {
      if (inc.acknowledge && inc.acknowledge.allowed) {
        parts.push(button('ack-button', inc.ack ? 'Take over' : 'Acknowledge', function () { acknowledge(inc.id); }, s.busy));
      }
      if (inc.silence && inc.silence.allowed && !s.form) {
        parts.push(button('silence-button', 'Silence…', function () {
          oncall[inc.id] = { form: { rule: inc.rule, namespace: inc.object.namespace || '', kind: inc.object.kind || '', app: owner(inc),
            appNamespace: ownerNamespace(inc), project: inc.app ? inc.app.project || '' : '', name: inc.object.name, duration: '2h', comment: '' } };
          rerender();
        }, s.busy));
      }
      if (s.form) parts.push(silenceForm(inc.id, s));
    }
    if (s.error) parts.push(el('p', { 'class': 'fix-error' }, [s.error]));
    return parts.length ? el('div', { 'class': 'oncall' }, parts) : null;
  }

  // silenceForm is the Silence… form: exact matchers prefilled from the incident (clear one to leave it out), a
  // duration and a comment. Its elements are kept across re-renders (the live stream re-renders the page on every
  // change), so what is being typed keeps its focus.
  function silenceForm(id, s) {
    if (!s.node) s.node = buildSilenceForm(id, s);
    Array.prototype.forEach.call(s.node.querySelectorAll('button'), function (b) { b.disabled = !!s.busy; });
    return s.node;
  }

  function buildSilenceForm(id, s) {
    var f = s.form;
    function input(key, label, attrs) {
      var i = el('input', Object.assign({ 'class': 'silence-' + key, 'aria-label': label, value: f[key] }, attrs || {}));
      i.addEventListener('input', function () { f[key] = i.value; });
      return el('label', {}, [label + ' ', i]);
    }
    var comment = el('textarea', { 'class': 'silence-comment', 'aria-label': 'comment', placeholder: 'why (required)' }, [f.comment]);
    comment.addEventListener('input', function () { f.comment = comment.value; });
    return el('div', { 'class': 'silence-form' }, [
      el('p', { 'class': 'meta' }, ['Silence the incidents that match every filled field exactly:']),
      input('rule', 'rule'), input('namespace', 'namespace'), input('kind', 'kind'), input('app', 'app'),
      input('appNamespace', 'app namespace'), input('project', 'project'), input('name', 'name'),
      input('duration', 'for', { placeholder: '2h' }), el('label', {}, ['comment ', comment]),
      button('silence-create', 'Silence', function () { createSilence(id, f); }),
      button('silence-cancel', 'Cancel', function () { oncall[id] = {}; rerender(); })
    ]);
  }

  // send posts (or deletes) JSON and records a refusal's message on the incident's on-call state.
  function send(method, url, body, id) {
    if (id) { oncall[id] = Object.assign({}, oncall[id], { busy: true, error: '' }); rerender(); }
    return fetch(url, { method: method, cache: 'no-store', headers: authHeaders(), body: body === undefined ? undefined : JSON.stringify(body) })
      .then(function (res) { return res.json().then(function (b) { return { status: res.status, body: b }; }); })
      .then(function (r) {
        if (r.status >= 300) throw new Error('Refused (' + r.status + '): ' + (r.body.error || 'unknown error'));
        return r.body;
      });
  }

  function acknowledge(id) {
    // Only the busy flag and the error change: a Silence… form opened meanwhile stays as it is.
    send('POST', api + '/' + encodeURIComponent(id) + '/ack', {}, id)
      .then(function () { return ''; }, function (err) { return err.message; })
      .then(function (error) { oncall[id] = Object.assign({}, oncall[id], { busy: false, error: error }); })
      .then(function () { rerender(); refresh(); });
  }

  function createSilence(id, f) {
    var matchers = ['rule', 'namespace', 'kind', 'app', 'appNamespace', 'project', 'name'].filter(function (k) { return f[k]; })
      .map(function (k) { return { name: k, value: f[k] }; });
    send('POST', silencesApi, { matchers: matchers, duration: f.duration, comment: f.comment }, id)
      .then(function () { oncall[id] = {}; }, function (err) { oncall[id] = Object.assign({}, oncall[id], { busy: false, error: err.message }); })
      .then(function () { rerender(); refresh(); });
  }

  function expireSilence(sid) {
    send('DELETE', silencesApi + '/' + encodeURIComponent(sid))
      .catch(function (err) { setStatus(err.message); })
      .then(function () { refresh(); });
  }

  // listSilences reads the silences (when serve keeps them and the token may read them).
  function listSilences() {
    return fetch(silencesApi, { headers: authHeaders(), cache: 'no-store' })
      .then(function (res) { return res.ok ? res.json() : { items: [] }; })
      .then(function (l) { silences = l.items || []; renderSilences(); }, function () {});
  }

  // renderSilences lists the active and pending silences, each with Expire.
  function renderSilences() {
    var box = document.getElementById('silences');
    box.textContent = '';
    var live = silences.filter(function (s) { return s.state !== 'expired'; });
    if (!live.length) return;
    box.appendChild(el('h2', {}, ['Silences']));
    box.appendChild(el('table', { 'class': 'silences' }, live.map(function (s) {
      return el('tr', { id: 'silence-' + s.id }, [
        el('td', {}, [s.state]),
        el('td', {}, [s.matchers.map(function (m) { return m.name + (m.isRegex ? '=~' : '=') + '"' + m.value + '"'; }).join(', ')]),
        el('td', {}, [(s.state === 'pending' ? 'starts ' + new Date(s.startsAt).toLocaleString() + ', ' : '') +
          'ends ' + new Date(s.endsAt).toLocaleString()]),
        el('td', {}, [s.createdBy + ': ' + s.comment]),
        el('td', {}, [button('silence-expire', 'Expire', function () { expireSilence(s.id); })])
      ]);
    })));
  }

  // fixedAndGone returns the incidents fixed from this page that have left the list (a fix resolves its incident,
  // and an open-only list drops it): they stay shown, resolved, with the fix's outcome, until the page is reloaded.
  // Each is read once by ID for its final state (its timeline says who asked for the fix).
  function fixedAndGone(listed) {
    var out = [];
    Object.keys(fixes).forEach(function (id) {
      if (!fixes[id].result || listed[id] || !seen[id]) return;
      if (finals[id]) { out.push(finals[id]); return; }
      out.push(Object.assign({}, seen[id], { state: 'resolved' }));
      if (finals[id] === false) return;
      finals[id] = false;
      fetch(api + '/' + encodeURIComponent(id), { headers: { Authorization: 'Bearer ' + sessionStorage.getItem(tokenKey) }, cache: 'no-store' })
        .then(function (res) { if (!res.ok) throw new Error('HTTP ' + res.status); return res.json(); })
        .then(function (inc) { finals[id] = inc; rerender(); }, function () { delete finals[id]; });
    });
    return out;
  }

  // render draws the list. While someone types in a Silence… form, an unchanged list (the live stream and a
  // refresh often bring the same one) is not drawn again, and the focused field keeps its focus when one is drawn.
  function render(list, force) {
    var json = JSON.stringify(list);
    var active = document.activeElement;
    var typing = active && active.closest && active.closest('.silence-form');
    if (typing && !force && json === lastJSON) return;
    lastJSON = json;
    last = list;
    var listed = {};
    list.items.forEach(function (inc) {
      listed[inc.id] = true;
      if (fixes[inc.id]) seen[inc.id] = inc;
    });
    var items = list.items.concat(fixedAndGone(listed));
    var main = document.getElementById('incidents');
    main.textContent = '';
    if (!items.length) {
      main.appendChild(el('p', { 'class': 'empty' }, [state === 'open' ? 'No open incidents.' : 'No incidents.']));
      return;
    }
    items.forEach(function (inc) { main.appendChild(card(inc)); });
    if (typing && active !== document.activeElement && document.contains(active)) active.focus();
  }

  function setStatus(text) { document.getElementById('status').textContent = text; }

  function refused() {
    sessionStorage.removeItem(tokenKey);
    document.getElementById('login').hidden = false;
    throw new Error('the token was refused');
  }

  function show(list, how) {
    document.getElementById('login').hidden = true;
    render(list);
    listSilences();
    setStatus(list.items.length + ' shown · ' + how + ' · updated ' + new Date().toLocaleTimeString());
  }

  // refresh reads the list once (after a fix, and when the stream is not available).
  function refresh() {
    var token = sessionStorage.getItem(tokenKey);
    if (!token) return Promise.resolve();
    return fetch(api + '?state=' + state, { headers: { Authorization: 'Bearer ' + token }, cache: 'no-store' })
      .then(function (res) {
        if (res.status === 401) refused();
        if (!res.ok) throw new Error('HTTP ' + res.status);
        return res.json();
      })
      .then(function (list) { show(list, stream ? 'live' : 'polling'); });
  }

  // follow reads the live stream until it ends, then polls and tries the stream again.
  function follow() {
    clearTimeout(retryTimer);
    clearTimeout(pollTimer);
    if (stream) stream.abort();
    var token = sessionStorage.getItem(tokenKey);
    if (!token) {
      document.getElementById('login').hidden = false;
      return;
    }
    var ctrl = new AbortController();
    stream = ctrl;
    fetch(api + '?watch=true&state=' + state, { headers: { Authorization: 'Bearer ' + token }, cache: 'no-store', signal: ctrl.signal })
      .then(function (res) {
        if (res.status === 401) refused();
        if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
        var reader = res.body.getReader();
        var decoder = new TextDecoder();
        var buf = '';
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) throw new Error('the live stream ended');
            buf += decoder.decode(r.value, { stream: true });
            var i;
            while ((i = buf.indexOf('\n\n')) >= 0) {
              var ev = buf.slice(0, i);
              buf = buf.slice(i + 2);
              ev.split('\n').forEach(function (line) {
                if (line.indexOf('data: ') === 0) show(JSON.parse(line.slice(6)), 'live');
              });
            }
            return pump();
          });
        }
        return pump();
      })
      .catch(function (err) {
        if (ctrl.signal.aborted) return;
        stream = null;
        setStatus('not live: ' + err.message);
        poll();
        retryTimer = setTimeout(follow, retryMillis);
      });
  }

  function poll() {
    clearTimeout(pollTimer);
    refresh()
      .catch(function (err) { setStatus('not updated: ' + err.message); })
      .then(function () {
        clearTimeout(pollTimer); // a poll that started while this one was out has scheduled the next already
        if (!stream) pollTimer = setTimeout(poll, pollMillis);
      });
  }

  document.getElementById('login').addEventListener('submit', function (e) {
    e.preventDefault();
    sessionStorage.setItem(tokenKey, document.getElementById('token').value.trim());
    follow();
  });
  Array.prototype.forEach.call(document.querySelectorAll('input[name=state]'), function (r) {
    r.addEventListener('change', function () { state = r.value; follow(); });
  });
  follow();
})();
