// The incident API as argocd-server's proxy extension exposes it, and helpers over its answers (docs/api.md).
export const api = '/extensions/syncmedic/api/v1/incidents';

// appHeaders are the headers argocd-server needs to authorize the call for this application.
export function appHeaders(app) {
  return {
    'Argocd-Application-Name': app.metadata.namespace + ':' + app.metadata.name,
    'Argocd-Project-Name': app.spec.project || 'default',
  };
}

export function isOpen(inc) { return inc.state !== 'resolved'; }

// isApplication reports whether resource is the application itself.
export function isApplication(resource, app) {
  const md = (resource && resource.metadata) || {};
  return !!resource && resource.kind === 'Application' && (resource.apiVersion || '').indexOf('argoproj.io/') === 0 &&
    md.name === app.metadata.name && (md.namespace || app.metadata.namespace) === app.metadata.namespace;
}

// incidentsOf returns the incidents about one resource of the application's tree.
export function incidentsOf(items, resource) {
  if (!resource) return [];
  const md = resource.metadata || {};
  const name = md.name || resource.name;
  const namespace = md.namespace || resource.namespace || '';
  const kind = resource.kind;
  return items.filter((i) => i.object.kind === kind && i.object.name === name && (i.object.namespace || '') === namespace);
}

export function age(iso, now) {
  if (!iso) return '';
  let s = Math.max(0, Math.floor(((now || Date.now()) - Date.parse(iso)) / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + ' min';
  if (s < 172800) return Math.floor(s / 3600) + 'h' + (Math.floor(s / 60) % 60 ? ' ' + (Math.floor(s / 60) % 60) + ' min' : '');
  return Math.floor(s / 86400) + 'd';
}

// requestFix asks for the plan of an incident's fix (confirm empty: a dry-run) or applies the reviewed plan. It
// resolves to {status, body}: 200 with kind FixPlan or FixResult, or a refusal {error, reason, plan?}.
export function requestFix(app, id, confirm) {
  const headers = Object.assign({ 'Content-Type': 'application/json' }, appHeaders(app));
  return fetch(api + '/' + encodeURIComponent(id) + '/fix', {
    method: 'POST', headers, credentials: 'same-origin', cache: 'no-store',
    body: JSON.stringify(confirm ? { confirm } : {}),
  }).then((res) => res.json().then((body) => ({ status: res.status, body }), () => ({ status: res.status, body: { error: 'HTTP ' + res.status } })));
}

// requestAck acknowledges (takes) an incident as the Argo CD user. It resolves to {status, body}: 200 with the
// incident, or {error}.
export function requestAck(app, id) {
  const headers = Object.assign({ 'Content-Type': 'application/json' }, appHeaders(app));
  return fetch(api + '/' + encodeURIComponent(id) + '/ack', {
    method: 'POST', headers, credentials: 'same-origin', cache: 'no-store', body: '{}',
  }).then((res) => res.json().then((body) => ({ status: res.status, body }), () => ({ status: res.status, body: { error: 'HTTP ' + res.status } })));
}
