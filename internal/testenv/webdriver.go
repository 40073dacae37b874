package testenv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Browser is a headless Chromium driven through chromedriver (Debian's chromium-driver) with the W3C WebDriver
// protocol: tests click buttons and read what the page shows, which --dump-dom cannot do.
type Browser struct {
	t       testing.TB
	base    string // http://127.0.0.1:port/session/id
	timeout time.Duration
}

// NewBrowser starts chromedriver and a headless Chromium session for the test; both stop when it ends. It fails
// the test when chromedriver is missing (make tools-ui installs it), or skips it under -short.
func NewBrowser(t testing.TB) *Browser {
	t.Helper()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		if testing.Short() {
			t.Skip("chromedriver is not installed: run make tools-ui")
		}
		t.Fatalf("chromedriver is not installed: run make tools-ui (%v)", err)
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed: run make tools-ui (%v)", err)
	}
	// Started again on another port when another process takes the one picked for it (StartOnFreePorts): its
	// /status must then come from a ChromeDriver, not from whatever took the port.
	c, ports, err := StartOnFreePorts(FreePortsOptions{Name: "chromedriver", Ports: 1,
		Start: func(ports []int) (PortChild, error) {
			return StartChild("chromedriver", exec.Command(driver, "--port="+strconv.Itoa(ports[0]), "--allowed-ips=127.0.0.1"), 5*time.Second)
		},
		Ready: func(ports []int, c PortChild) error { return waitChromedriver(loopback(ports[0]), c.Exited()) },
	})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(c.Stop)
	root := "http://" + loopback(ports[0])
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{"binary": chromium, "args": []string{
			"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1200,900",
			"--user-data-dir=" + t.TempDir()}},
	}}}
	var session struct {
		SessionID string `json:"sessionId"`
	}
	b := &Browser{t: t, base: root, timeout: 30 * time.Second}
	b.call(http.MethodPost, "/session", caps, &session)
	if session.SessionID == "" {
		t.Fatal("testenv: chromedriver returned no session")
	}
	b.base = root + "/session/" + session.SessionID
	t.Cleanup(func() { b.call(http.MethodDelete, "", nil, nil) })
	return b
}

// call sends one WebDriver command and decodes its "value" into out.
func (b *Browser) call(method, path string, in, out any) {
	b.t.Helper()
	if err := b.try(method, path, in, out); err != nil {
		b.t.Fatalf("testenv: webdriver %s %s: %v", method, path, err)
	}
}

func (b *Browser) try(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		j, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	var env struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("HTTP %d: %s", res.StatusCode, raw)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", res.StatusCode, env.Value)
	}
	if out != nil {
		return json.Unmarshal(env.Value, out)
	}
	return nil
}

// Open navigates to url.
func (b *Browser) Open(url string) {
	b.t.Helper()
	b.call(http.MethodPost, "/url", map[string]string{"url": url}, nil)
}

// Source returns the page's current DOM as HTML.
func (b *Browser) Source() string {
	b.t.Helper()
	var s string
	b.call(http.MethodGet, "/source", nil, &s)
	return s
}

// Text returns the visible text of the page's body.
func (b *Browser) Text() string {
	b.t.Helper()
	var s string
	b.call(http.MethodPost, "/execute/sync", map[string]any{"script": "return document.body.innerText", "args": []any{}}, &s)
	return s
}

// WaitText waits until the page's visible text contains want, and fails the test with the text it last saw.
func (b *Browser) WaitText(want string) {
	b.t.Helper()
	deadline := time.Now().Add(b.timeout)
	var text string
	var err error
	for time.Now().Before(deadline) {
		if err = b.try(http.MethodPost, "/execute/sync", map[string]any{"script": "return document.body.innerText", "args": []any{}}, &text); err == nil && strings.Contains(text, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.t.Fatalf("testenv: the page never showed %q; reading it last failed: %v; before that it showed:\n%s", want, err, text)
	}
	b.t.Fatalf("testenv: the page never showed %q; it shows:\n%s", want, text)
}

// Click waits for the first element matching the CSS selector to be there and enabled, and clicks it.
func (b *Browser) Click(selector string) {
	b.t.Helper()
	deadline := time.Now().Add(b.timeout)
	var last error
	for time.Now().Before(deadline) {
		var ref map[string]string
		if last = b.try(http.MethodPost, "/element", map[string]string{"using": "css selector", "value": selector}, &ref); last == nil {
			for _, id := range ref {
				var enabled bool
				if last = b.try(http.MethodGet, "/element/"+id+"/enabled", nil, &enabled); last == nil && enabled {
					if last = b.try(http.MethodPost, "/element/"+id+"/click", map[string]any{}, nil); last == nil {
						return
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("testenv: cannot click %s: %v\npage text:\n%s", selector, last, b.Text())
}

// Type waits for the first element matching the CSS selector to be there and enabled, and types text into it (as
// keystrokes, so the page sees its input events).
func (b *Browser) Type(selector, text string) {
	b.t.Helper()
	deadline := time.Now().Add(b.timeout)
	var last error
	for time.Now().Before(deadline) {
		var ref map[string]string
		if last = b.try(http.MethodPost, "/element", map[string]string{"using": "css selector", "value": selector}, &ref); last == nil {
			for _, id := range ref {
				var enabled bool
				if last = b.try(http.MethodGet, "/element/"+id+"/enabled", nil, &enabled); last == nil && enabled {
					if last = b.try(http.MethodPost, "/element/"+id+"/value", map[string]any{"text": text}, nil); last == nil {
						return
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("testenv: cannot type into %s: %v\npage text:\n%s", selector, last, b.Text())
}

// Screenshot returns a PNG of the window.
func (b *Browser) Screenshot() []byte {
	b.t.Helper()
	var s string
	b.call(http.MethodGet, "/screenshot", nil, &s)
	png, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b.t.Fatalf("testenv: screenshot: %v", err)
	}
	return png
}

// waitChromedriver waits until the ChromeDriver on addr answers /status as ready for new sessions.
func waitChromedriver(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get("http://" + addr + "/status")
		if err == nil {
			var status struct {
				Value struct {
					Ready   bool   `json:"ready"`
					Message string `json:"message"`
				} `json:"value"`
			}
			err = json.NewDecoder(res.Body).Decode(&status)
			res.Body.Close()
			if err == nil && !(status.Value.Ready && strings.Contains(status.Value.Message, "ChromeDriver")) {
				err = fmt.Errorf("%s/status is not a ready ChromeDriver: %+v", addr, status.Value)
			}
			if err == nil {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("chromedriver exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chromedriver did not answer: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
