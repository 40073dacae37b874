// The extension's views, drawn with the host's React (no JSX, no other dependency).
import { age, requestAck, requestFix } from './api.js';

const React = window.React;
const h = React.createElement;

const colors = { firing: '#e96d76', remediating: '#0dadea', resolved: '#18be94' };
const mono = { fontFamily: 'monospace' };
const pre = { background: '#1d2733', color: '#e8eef2', padding: '6px 8px', borderRadius: 4, whiteSpace: 'pre-wrap', wordBreak: 'break-all', margin: '4px 0' };
const th = { textAlign: 'left', color: '#6d7f8b', fontWeight: 'normal', paddingRight: 8, verticalAlign: 'top', width: '35%', wordBreak: 'break-all' };
const section = { margin: '12px 0 4px', fontSize: 12, textTransform: 'uppercase', color: '#6d7f8b' };

function Badge(props) {
  return h('span', { style: { background: colors[props.state] || '#6d7f8b', color: '#fff', borderRadius: 10, padding: '0 8px', fontSize: 12, marginRight: 6 } }, props.state);
}

function objectName(o) {
  return o.kind + '/' + (o.namespace ? o.namespace + '/' : '') + o.name;
}

const button = { marginRight: 8, padding: '3px 12px', borderRadius: 4, border: '1px solid #0dadea', background: '#fff', cursor: 'pointer' };
const primary = Object.assign({}, button, { background: '#0dadea', color: '#fff' });

// FixBox offers the incident's fix where the policy's fixBy lets the user apply it: the plan first (a dry-run that
// changes nothing), then "Apply this fix" on the reviewed plan.
function FixBox(props) {
  const inc = props.incident;
  const [s, setS] = React.useState({});
  if (!inc.fix) return null;
  const outcome = s.result ? h('div', { className: 'syncmedic-fix-result', style: { color: '#18be94', marginTop: 6 } },
    s.result.action + ': ' + s.result.result + (s.result.changed ? ' (changed)' : ' (nothing to change)') + (s.result.error ? ' — ' + s.result.error : '')) : null;
  // A fix resolves its incident, often at once: the outcome stays shown on the resolved incident.
  if (inc.state === 'resolved') return outcome;
  if (!inc.fix.allowed) return h('div', { className: 'syncmedic-fix-denied', style: { color: '#6d7f8b', marginTop: 6 } }, 'Fix on demand: ' + inc.fix.reason);
  const ask = (confirm) => {
    setS((prev) => Object.assign({}, prev, { busy: true, error: '' }));
    requestFix(props.application, inc.id, confirm)
      .then((r) => {
        if (r.status === 200 && r.body.kind === 'FixPlan') setS({ plan: r.body });
        else if (r.status === 200) setS({ result: r.body });
        else if (r.status === 409 && r.body.plan) setS({ plan: r.body.plan, error: r.body.error });
        else setS({ error: 'Refused (' + r.status + '): ' + (r.body.error || 'unknown error') });
      })
      .catch((err) => setS({ error: 'The fix request failed: ' + err.message }))
      .then(() => props.onChange && props.onChange());
  };
  return h('div', { className: 'syncmedic-fix', style: { marginTop: 8, padding: '8px 10px', border: '1px dashed #dee6eb', borderRadius: 4 } },
    s.plan ? [
      h('div', { key: 't' }, 'syncmedic will apply ' + s.plan.action + ':'),
      h('ul', { key: 's', className: 'syncmedic-fix-steps', style: mono }, s.plan.steps.map((x, i) => h('li', { key: i }, x))),
      s.plan.warnings.map((w, i) => h('div', { key: 'w' + i, className: 'syncmedic-fix-warning', style: { color: '#8a5a00', background: '#fff6dc', padding: '4px 8px', borderRadius: 4, margin: '4px 0' } }, w)),
      h('button', { key: 'c', className: 'syncmedic-fix-confirm', style: primary, disabled: !!s.busy, onClick: () => ask(s.plan.confirm) }, 'Apply this fix'),
      h('button', { key: 'x', className: 'syncmedic-fix-cancel', style: button, disabled: !!s.busy, onClick: () => setS({}) }, 'Cancel'),
    ] : h('button', { className: 'syncmedic-fix-plan', style: button, disabled: !!s.busy, onClick: () => ask('') }, 'Fix…'),
    outcome,
    s.error ? h('div', { className: 'syncmedic-fix-error', style: { color: '#e96d76', marginTop: 6 } }, s.error) : null);
}

// OnCall shows who acknowledged the incident and the silence that mutes it, with Acknowledge (or Take over) where
// the policy lets the user.
function OnCall(props) {
  const inc = props.incident;
  const [s, setS] = React.useState({});
  const parts = [];
  if (inc.ack) {
    parts.push(h('div', { key: 'a', className: 'syncmedic-ack', style: { color: '#18be94' } }, 'Acknowledged by ' + inc.ack.by + ' ' + age(inc.ack.at) + ' ago' +
      (inc.ack.takenOverFrom ? ' (taken over from ' + inc.ack.takenOverFrom + ')' : '')));
  }
  if (inc.silencedBy) {
    parts.push(h('div', { key: 's', className: 'syncmedic-silenced', style: { color: '#8a5a00', background: '#fff6dc', padding: '4px 8px', borderRadius: 4, margin: '4px 0' } },
      'Silenced by silence ' + inc.silencedBy + (inc.unannounced ? ': not announced yet' : '') + '; no automatic remedy while it lasts.'));
  }
  if (inc.state !== 'resolved' && inc.acknowledge && inc.acknowledge.allowed) {
    const ack = () => {
      setS({ busy: true });
      requestAck(props.application, inc.id)
        .then((r) => setS(r.status === 200 ? {} : { error: 'Refused (' + r.status + '): ' + (r.body.error || 'unknown error') }))
        .catch((err) => setS({ error: 'The acknowledgement failed: ' + err.message }))
        .then(() => props.onChange && props.onChange());
    };
    parts.push(h('button', { key: 'b', className: 'syncmedic-ack-button', style: button, disabled: !!s.busy, onClick: ack }, inc.ack ? 'Take over' : 'Acknowledge'));
  }
  if (s.error) parts.push(h('div', { key: 'e', className: 'syncmedic-ack-error', style: { color: '#e96d76', marginTop: 6 } }, s.error));
  return parts.length ? h('div', { style: { margin: '6px 0' } }, parts) : null;
}

function Incident(props) {
  const inc = props.incident;
  return h('div', { className: 'syncmedic-incident', style: { border: '1px solid #dee6eb', borderLeft: '4px solid ' + (colors[inc.state] || '#6d7f8b'), borderRadius: 4, padding: '10px 14px', marginBottom: 12, background: '#fff' } },
    h('div', { style: { fontSize: 15, fontWeight: 500 } }, h(Badge, { state: inc.state }), inc.title),
    h('div', { style: { color: '#6d7f8b', margin: '2px 0 6px' } }, inc.rule + ' · ' + objectName(inc.object) + ' · open ' + age(inc.openedAt)),
    h('div', null, inc.summary),
    h(OnCall, { incident: inc, application: props.application, onChange: props.onChange }),
    h('div', { style: section }, 'Evidence'),
    h('table', null, h('tbody', null, inc.evidence.map((e, i) => h('tr', { key: i },
      h('th', { style: Object.assign({}, th, mono) }, e.field),
      h('td', null, e.value + (e.since ? ' (' + age(e.since) + ' ago)' : '')))))),
    h('div', { style: section }, 'Fix'),
    h('div', null, inc.remedy.description || 'No automatic remedy: see the evidence.'),
    inc.remedy.action ? h('div', { style: { color: '#6d7f8b' } }, 'action ' + inc.remedy.action + (inc.auto ? ' — syncmedic applies it automatically' : ' — not automatic under the policy') + (inc.remedy.rerunsHooks ? '; re-runs every hook' : '')) : null,
    inc.remedy.commands.map((c, i) => h('pre', { key: i, style: pre }, c)),
    h(FixBox, { incident: inc, application: props.application, onChange: props.onChange }),
    inc.attempts.length ? h('div', { style: section }, 'Attempts') : null,
    inc.attempts.length ? h('table', null, h('tbody', null, inc.attempts.map((a, i) => h('tr', { key: i },
      h('th', { style: th }, new Date(a.at).toLocaleString()),
      h('td', null, a.action + ': ' + a.result + (a.error ? ' — ' + a.error : a.reason ? ' — ' + a.reason : '')))))) : null);
}

function Message(props) {
  return h('div', { className: 'syncmedic-message', style: { color: '#6d7f8b', padding: '16px 0' } }, props.children);
}

// IncidentList is the body of the application and resource tabs.
export function IncidentList(props) {
  const s = props.state;
  if (s.loading) return h(Message, null, 'Loading syncmedic incidents…');
  return h('div', { className: 'syncmedic', style: { padding: '8px 0' } },
    s.error ? h(Message, null, 'syncmedic: ' + s.error) : null,
    !s.error && props.items.length === 0 ? h(Message, null, 'syncmedic has no incident here.') : null,
    props.items.map((inc) => h(Incident, { key: inc.id, incident: inc, application: props.application, onChange: props.onChange })));
}

// StatusPanel is the entry in the application's status panel: the worst open incident, or none.
export function StatusPanel(props) {
  const s = props.state;
  const first = props.items[0];
  const text = s.error ? 'unavailable' : first ? first.title + ' — ' + age(first.since || first.openedAt) + (props.items.length > 1 ? ' (+' + (props.items.length - 1) + ')' : '') : s.loading ? '…' : 'no incident';
  return h('div', { className: 'syncmedic-status', style: { cursor: props.openFlyout ? 'pointer' : 'default' }, onClick: () => props.openFlyout && props.openFlyout(), title: s.error || '' },
    h('div', { style: { fontSize: 11, color: '#6d7f8b', textTransform: 'uppercase' } }, 'syncmedic'),
    h('div', { style: { color: first ? colors[first.state] : '#18be94', fontWeight: 500 } }, text));
}

// Flyout opens from the status panel with every incident of the application.
export function Flyout(props) {
  return h('div', { style: { padding: 16 } }, h('h4', null, 'syncmedic'), h(IncidentList, props));
}
