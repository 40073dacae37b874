package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// TestServeMovesSilencesToTheirOwnConfigMap upgrades, on the real apiserver, a state ConfigMap written by a
// syncmedic that kept its silences beside the incidents: serve lists the stored silence, moves it to
// <state>-silences and removes it from the state ConfigMap, whose incidents stay as they were; a silence created
// afterwards is stored beside it there, and the state ConfigMap holds no silence.
func TestServeMovesSilencesToTheirOwnConfigMap(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const token = "api-token-for-the-silence-store-test"
	now := time.Now().UTC().Truncate(time.Second)
	legacy := `{"version":1,"silences":[{"id":"0b7c4f8e-1111-4222-8333-444455556666","matchers":[{"name":"app","value":"web"}],` +
		`"startsAt":"` + now.Add(-time.Hour).Format(time.RFC3339) + `","endsAt":"` + now.Add(time.Hour).Format(time.RFC3339) + `",` +
		`"createdBy":"the API token holder","comment":"stored by an earlier syncmedic","updatedAt":"` + now.Add(-time.Hour).Format(time.RFC3339) + `"}]}`
	incidents := `{"version":1,"incidents":[]}`
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "syncmedic-state"},
		Data: map[string]string{incident.ConfigMapDataKey: incidents, incident.ConfigMapSilencesKey: legacy}}))

	srv := startServe(t, "--kubeconfig", env.Kubeconfig, "--state-configmap", ns+"/syncmedic-state", "--flux-watch=false", "--kube-events=false",
		"--api-token-file", writeFile(t, "api-token", token+"\n"), "--policy-file", writeFile(t, "policy.yaml", `silenceBy: ["token"]`))
	require.Eventually(t, func() bool { code, _ := get(srv.Base + "/readyz"); return code == http.StatusOK }, 60*time.Second, 50*time.Millisecond, srv.Logs.String())
	auth := http.Header{"Authorization": {"Bearer " + token}}
	configMap := func(name string) (*corev1.ConfigMap, error) {
		cm := &corev1.ConfigMap{}
		return cm, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)
	}
	listed := func() []string {
		t.Helper()
		code, _, body := apiIncidents(srv.Base+ui.SilencesPath, auth)
		require.Equal(t, http.StatusOK, code, body)
		var l ui.SilenceList
		require.NoError(t, json.Unmarshal([]byte(body), &l))
		var ids []string
		for _, s := range l.Items {
			ids = append(ids, s.ID)
		}
		return ids
	}

	require.Equal(t, []string{"0b7c4f8e-1111-4222-8333-444455556666"}, listed(), "the stored silence survives the upgrade")
	own, err := configMap("syncmedic-state-silences")
	require.NoError(t, err, "the silences have their own ConfigMap")
	require.JSONEq(t, legacy, own.Data[incident.ConfigMapSilencesKey])
	state, err := configMap("syncmedic-state")
	require.NoError(t, err)
	require.NotContains(t, state.Data, incident.ConfigMapSilencesKey, "the silences left the state ConfigMap")
	require.Contains(t, state.Data, incident.ConfigMapDataKey, "the incidents stayed")

	code, body := postJSON(t, srv.Base+ui.SilencesPath, `{"matchers": [{"name": "app", "value": "shop"}], "duration": "1h", "comment": "after the upgrade"}`, auth)
	require.Equal(t, http.StatusCreated, code, body)
	var created ui.Silence
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	require.ElementsMatch(t, []string{"0b7c4f8e-1111-4222-8333-444455556666", created.ID}, listed())
	own, err = configMap("syncmedic-state-silences")
	require.NoError(t, err)
	stored, err := incident.DecodeSilences([]byte(own.Data[incident.ConfigMapSilencesKey]))
	require.NoError(t, err)
	require.Len(t, stored, 2)
	state, err = configMap("syncmedic-state")
	require.NoError(t, err)
	require.NotContains(t, state.Data, incident.ConfigMapSilencesKey)
}
