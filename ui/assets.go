package ui

import "embed"

// assets are the incident page's files: no external CDN, nothing fetched from elsewhere.
//
//go:embed static
var assets embed.FS
