// Package ui serves syncmedic's incidents to people: a read-only JSON API (/api/v1/incidents, documented in
// docs/api.md) behind a bearer token, which the Argo CD proxy extension calls on behalf of its users, and an
// incident page with no external assets (/ui/).
package ui
