// Package docgen keeps the generated sections of the docs (the flags, the rule catalog, the chart values, the RBAC
// tables) equal to what the code and the manifests say: it renders Markdown tables and replaces, or checks, the text
// between a page's `<!-- BEGIN GENERATED: name -->` and `<!-- END GENERATED: name -->` markers.
package docgen
