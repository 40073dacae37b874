package ui

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/syncmedic/syncmedic/policy"
)

// MinTokenLength is the shortest API or proxy token serve accepts (openssl rand -hex 32 writes 64 characters).
const MinTokenLength = 32

// credential is one API token and the name its line gave it ("" for a file holding one bare token).
type credential struct {
	name   string
	secret []byte
}

// credentials are the tokens of one token file.
type credentials []credential

// match returns the credential whose secret is got, comparing every one in constant time.
func (cs credentials) match(got []byte) (credential, bool) {
	var found credential
	ok := false
	for _, c := range cs {
		if subtle.ConstantTimeCompare(got, c.secret) == 1 {
			found, ok = c, true
		}
	}
	return found, ok
}

// parseAPITokens reads an API token file: one bare token, or lines "<name>:<token>", one person each (the name is
// what "token:<name>" policy entries match). Empty lines and lines starting with # are skipped. Errors never hold a
// token.
func parseAPITokens(s string) (credentials, error) {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("no token: write one (openssl rand -hex 32), or lines <name>:<token>")
	}
	if len(lines) == 1 && !strings.Contains(lines[0], ":") {
		if err := checkTokenLength("the token", lines[0]); err != nil {
			return nil, err
		}
		return credentials{{secret: []byte(lines[0])}}, nil
	}
	var out credentials
	names := map[string]int{}
	for i, l := range lines {
		name, secret, ok := strings.Cut(l, ":")
		name, secret = strings.TrimSpace(name), strings.TrimSpace(secret)
		switch {
		case !ok:
			return nil, fmt.Errorf("token line %d has no name: with several tokens write each as <name>:<token>", i+1)
		case !policy.IsTokenName(name):
			return nil, fmt.Errorf("token line %d: the name before the colon is not a token name (letters, digits, '.', '_', '@', '-', at most 64)", i+1)
		case names[name] != 0:
			return nil, fmt.Errorf("token line %d: the name %q is also on line %d: give each person one line", i+1, name, names[name])
		}
		if err := checkTokenLength(fmt.Sprintf("the token of %q (line %d)", name, i+1), secret); err != nil {
			return nil, err
		}
		for _, c := range out {
			if subtle.ConstantTimeCompare(c.secret, []byte(secret)) == 1 {
				return nil, fmt.Errorf("token line %d: %q has the same token as %q: give each person their own", i+1, name, c.name)
			}
		}
		names[name] = i + 1
		out = append(out, credential{name: name, secret: []byte(secret)})
	}
	return out, nil
}

// parseProxyToken reads the proxy token file: one bare token.
func parseProxyToken(s string) (credentials, error) {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "\n:") {
		return nil, fmt.Errorf("the proxy token file holds one token, without a name or other lines (openssl rand -hex 32)")
	}
	if err := checkTokenLength("the proxy token", s); err != nil {
		return nil, err
	}
	return credentials{{secret: []byte(s)}}, nil
}

func checkTokenLength(what, token string) error {
	if n := len(token); n < MinTokenLength {
		return fmt.Errorf("%s is %d characters, want at least %d: write a random one with openssl rand -hex 32", what, n, MinTokenLength)
	}
	return nil
}

// tokenSource parses a token file's content each time it changes (a rotated Secret) and keeps the last good
// tokens while a new content is invalid.
type tokenSource struct {
	what  string // "API token", for the log
	read  func() []byte
	parse func(string) (credentials, error)
	log   *slog.Logger

	mu  sync.Mutex
	raw string
	cur credentials
}

// newTokenSource parses the content read returns now: an invalid one is an error (serve refuses to start).
func newTokenSource(what string, read func() []byte, parse func(string) (credentials, error), log *slog.Logger) (*tokenSource, error) {
	raw := string(read())
	cur, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &tokenSource{what: what, read: read, parse: parse, log: log, raw: raw, cur: cur}, nil
}

// get returns the tokens in force.
func (t *tokenSource) get() credentials {
	raw := string(t.read())
	t.mu.Lock()
	defer t.mu.Unlock()
	if raw == t.raw {
		return t.cur
	}
	t.raw = raw
	cur, err := t.parse(raw)
	if err != nil {
		t.log.Error("the changed token file is invalid; the previous tokens stay in force", "file", t.what, "err", err)
		return t.cur
	}
	t.cur = cur
	return cur
}
