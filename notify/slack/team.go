package slack

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"
)

// CheckTeam asks auth.test which workspace client's token belongs to, and returns an error unless it is teamID.
func CheckTeam(ctx context.Context, client *slack.Client, teamID string) error {
	res, err := client.AuthTestContext(ctx)
	if err != nil {
		return fmt.Errorf("auth.test could not confirm the bot token's workspace: %w", err)
	}
	if res.TeamID != teamID {
		return fmt.Errorf("auth.test: the bot token belongs to workspace %s (%s), not %s", res.TeamID, res.Team, teamID)
	}
	return nil
}

// fromTeam returns an error unless cb comes from the workspace InteractionOptions.TeamID pins (any, when unset).
func (x *Interactions) fromTeam(cb slack.InteractionCallback) error {
	if x.o.TeamID == "" || cb.Team.ID == x.o.TeamID {
		return nil
	}
	return fmt.Errorf("the interaction comes from workspace %q, not %s", cb.Team.ID, x.o.TeamID)
}
