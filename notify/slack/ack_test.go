package slack

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/incident"
)

func TestAcknowledgementReplies(t *testing.T) {
	inc := goldenIncident()
	at := inc.OpenedAt.Add(time.Minute)
	for _, tc := range []struct {
		name string
		ack  *incident.Ack
		want string
	}{
		{"the first acknowledgement names who took it", &incident.Ack{By: "argocd user alice", At: at}, ":raising_hand: Acknowledged by argocd user alice."},
		{"a takeover names both", &incident.Ack{By: "argocd user bob", At: at, TakenOverFrom: "argocd user alice"},
			":raising_hand: Acknowledged by argocd user bob, taking over from argocd user alice."},
		{"names cannot inject mentions", &incident.Ack{By: "<!channel>", At: at}, ":raising_hand: Acknowledged by &lt;!channel&gt;."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := inc
			i.Ack = tc.ack
			require.Equal(t, tc.want, ReplyText(incident.Event{Kind: incident.EventAcknowledged, At: at, Incident: i}))
		})
	}
}
