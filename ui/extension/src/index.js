// syncmedic's Argo CD UI extension: a status-panel entry and an application tab (both v2.14 and v3 extension API)
// and a resource tab, showing why a sync is stuck and how to fix it, read through the proxy extension
// (/extensions/syncmedic/ on argocd-server, which checks the user's RBAC and forwards to syncmedic's incident API).
// React comes from the host (window.React); nothing else is loaded.
import { api, appHeaders, incidentsOf, isApplication, isOpen } from './api.js';
import { IncidentList, StatusPanel, Flyout } from './components.js';

const React = window.React;
const h = React.createElement;
const pollMillis = 10000;

// useIncidents polls the incident API for the application's incidents (open and recently resolved).
function useIncidents(application) {
  const [state, setState] = React.useState({ loading: true, items: [], error: '' });
  const [tick, setTick] = React.useState(0);
  const key = application && application.metadata ? application.metadata.namespace + ':' + application.metadata.name : '';
  React.useEffect(() => {
    let stopped = false;
    let timer = null;
    const load = () => {
      fetch(api + '?state=all', { headers: appHeaders(application), credentials: 'same-origin', cache: 'no-store' })
        .then((res) => {
          if (!res.ok) throw new Error(res.status === 401 || res.status === 403 ? 'not allowed to invoke the syncmedic extension (RBAC: extensions, invoke, syncmedic)' : 'HTTP ' + res.status);
          return res.json();
        })
        .then((list) => { if (!stopped) setState({ loading: false, items: list.items || [], error: '' }); })
        .catch((err) => { if (!stopped) setState((s) => ({ loading: false, items: s.items, error: err.message })); })
        .then(() => { if (!stopped) timer = setTimeout(load, pollMillis); });
    };
    load();
    return () => { stopped = true; clearTimeout(timer); };
  }, [key, tick]);
  // reload reads the incidents again at once (after a fix).
  return Object.assign({}, state, { reload: () => setTick((n) => n + 1) });
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
