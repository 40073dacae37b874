package testenv

import "net/http"

// Eval runs script (a function body; `return` gives the value) in the page and decodes its value into out (nil
// ignores it).
func (b *Browser) Eval(script string, out any) {
	b.t.Helper()
	b.call(http.MethodPost, "/execute/sync", map[string]any{"script": script, "args": []any{}}, out)
}

// Resize sets the browser window's size in CSS pixels (a screenshot's size).
func (b *Browser) Resize(width, height int) {
	b.t.Helper()
	b.call(http.MethodPost, "/window/rect", map[string]int{"width": width, "height": height}, nil)
}
