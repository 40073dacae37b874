// syncmedic's Argo CD UI extension: a status-panel entry and an application tab (both v2.14 and v3 extension API)
// and a resource tab, showing why a sync is stuck and how to fix it, read through the proxy extension
// (/extensions/syncmedic/ on argocd-server, which checks the user's RBAC and forwards to syncmedic's incident API).
// React comes from the host (window.React); nothing else is loaded.
import { api, appHeaders, incidentsOf, isApplication, isOpen } from './api.js';
import { IncidentList, StatusPanel, Flyout } from './components.js';

const React = window.React;
const h = React.createElement;
const pollMillis = 10000;

const retryMillis = 30000;

// refusal words a refusal of argocd-server's proxy.
function refusal(res) {
  return new Error(res.status === 401 || res.status === 403 ? 'not allowed to invoke the syncmedic extension (RBAC: extensions, invoke, syncmedic)' : 'HTTP ' + res.status);
}

// A feed follows one application's incidents (open and recently resolved) for every component of the extension that
// shows them: the incident API's live stream (?watch=true, server-sent events, which argocd-server's proxy extension
// passes through as they come), read with fetch so Argo CD's headers go along; when the stream cannot be opened or
// ends, it polls every pollMillis and tries the stream again after retryMillis. One stream per application, however
// many components show it (status panel, flyout, application tab, resource tabs): a browser gives a host six HTTP/1.1
// connections, and Argo CD's own views hold several streams of their own, so a stream per component left Argo CD's
// requests queued behind the extension's.
const feeds = new Map();

// closeMillis is how long a feed nobody shows stays open: a component replaced by another of the same application
// (switching tabs) takes over its stream instead of opening a new one.
const closeMillis = 2000;

// appKey names an application as Argo CD's headers do (namespace:name), or '' when there is none.
function appKey(application) {
  return application && application.metadata ? application.metadata.namespace + ':' + application.metadata.name : '';
}

// openFeed starts following application's incidents; its subscribers are called with every new state.
function openFeed(application) {
  const feed = { state: { loading: true, items: [], error: '' }, subs: new Set(), closing: null };
  const publish = (next) => {
    feed.state = next;
    feed.subs.forEach((fn) => fn(next));
  };
  let stopped = false;
  let live = false;
  let timer = null;
  let retry = null;
  let ctrl = null;
  let polls = 0; // the poll loop running; an older loop stops at its next turn
  const url = api + '?state=all';
  const opts = () => ({ headers: appHeaders(application), credentials: 'same-origin', cache: 'no-store' });
  const got = (list) => { if (!stopped) publish({ loading: false, items: list.items || [], error: '' }); };
  const failed = (err) => { if (!stopped) publish({ loading: false, items: feed.state.items, error: err.message }); };
  const read = () => fetch(url, opts()).then((res) => { if (!res.ok) throw refusal(res); return res.json(); }).then(got, failed);
  const poll = (loop) => {
    read().then(() => { if (!stopped && !live && loop === polls) timer = setTimeout(() => poll(loop), pollMillis); });
  };
  const follow = () => {
    ctrl = new AbortController();
    fetch(url + '&watch=true', Object.assign(opts(), { signal: ctrl.signal }))
      .then((res) => {
        if (!res.ok || !res.body) throw refusal(res);
        live = true;
        polls++;
        clearTimeout(timer);
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buf = '';
        const pump = () => reader.read().then((r) => {
          if (r.done) throw new Error('the live stream ended');
          buf += decoder.decode(r.value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const ev = buf.slice(0, i);
            buf = buf.slice(i + 2);
            ev.split('\n').forEach((line) => { if (line.indexOf('data: ') === 0) got(JSON.parse(line.slice(6))); });
          }
          return pump();
        });
        return pump();
      })
      .catch(() => {
        if (stopped) return;
        live = false;
        poll(++polls);
        retry = setTimeout(follow, retryMillis);
      });
  };
  // reload reads the incidents again at once (after a fix), beside the stream.
  feed.reload = () => { if (!stopped) read(); };
  feed.stop = () => {
    stopped = true;
    clearTimeout(timer);
    clearTimeout(retry);
    if (ctrl) ctrl.abort();
  };
  follow();
  return feed;
}

// useIncidents returns the application's incidents from its shared feed, opened by the first component that shows
// the application and closed closeMillis after the last one went, and reload, which reads them again at once.
function useIncidents(application) {
  const key = appKey(application);
  const [state, setState] = React.useState(() => (feeds.has(key) ? feeds.get(key).state : { loading: true, items: [], error: '' }));
  React.useEffect(() => {
    if (!key) return undefined;
    let feed = feeds.get(key);
    if (!feed) {
      feed = openFeed(application);
      feeds.set(key, feed);
    }
    clearTimeout(feed.closing);
    feed.closing = null;
    feed.subs.add(setState);
    setState(feed.state);
    return () => {
      feed.subs.delete(setState);
      if (feed.subs.size > 0) return;
      feed.closing = setTimeout(() => {
        if (feed.subs.size > 0 || feeds.get(key) !== feed) return;
        feed.stop();
        feeds.delete(key);
      }, closeMillis);
    };
  }, [key]);
  return Object.assign({}, state, { reload: () => { const feed = feeds.get(key); if (feed) feed.reload(); } });
}

function AppTab(props) {
  const s = useIncidents(props.application);
  return h(IncidentList, { state: s, items: s.items, application: props.application, onChange: s.reload });
}

// ResourceTab shows the incidents about one resource; on the Application itself (Argo CD's application tab is the
// resource tab of argoproj.io/Application) every incident of the application.
function ResourceTab(props) {
  const s = useIncidents(props.application);
  const items = isApplication(props.resource, props.application) ? s.items : incidentsOf(s.items, props.resource);
  return h(IncidentList, { state: s, items: items, application: props.application, onChange: s.reload });
}

function Panel(props) {
  const s = useIncidents(props.application);
  return h(StatusPanel, { state: s, items: s.items.filter(isOpen), openFlyout: props.openFlyout });
}

function PanelFlyout(props) {
  const s = useIncidents(props.application);
  return h(Flyout, { state: s, items: s.items, application: props.application, onChange: s.reload });
}

const ext = window.extensionsAPI;
if (ext) {
  if (ext.registerStatusPanelExtension) ext.registerStatusPanelExtension(Panel, 'syncmedic', 'syncmedic', PanelFlyout);
  if (ext.registerAppViewExtension) ext.registerAppViewExtension(AppTab, 'syncmedic', 'fa fa-stethoscope');
  if (ext.registerResourceExtension) ext.registerResourceExtension(ResourceTab, '**', '*', 'syncmedic', { icon: 'fa fa-stethoscope' });
}
