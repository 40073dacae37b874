package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// auditPolicy logs every request at level Metadata (who, verb, object, response code; no bodies), once it has an
// answer: RequestReceived is omitted, so a request is one ResponseComplete event (a watch also has ResponseStarted).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`

// auditLogFile is the audit log's name in the directory auditFlags is given.
const auditLogFile = "kube-apiserver-audit.log"

// auditFlags writes the audit policy into dir and returns the kube-apiserver flags that log every request there
// (dir/kube-apiserver-audit.log, JSON lines of audit.k8s.io/v1 Events, written before the request returns: the log
// backend's default blocking mode, no rotation).
func auditFlags(dir string) (map[string]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("the apiserver's audit policy: %w", err)
	}
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    filepath.Join(dir, auditLogFile),
		"audit-log-format":  "json",
	}, nil
}

// AuditCall is one request an apiserver's audit log recorded: a resource request (Verb on Group/Resource, with its
// Subresource, in Namespace, for Name when the request named one — a list or watch with the field selector
// metadata.name= names it too) or a NonResourceURL (a discovery GET such as /apis), and the Code it was answered
// with (403: forbidden).
type AuditCall struct {
	Verb, Group, Resource, Subresource, Namespace, Name string
	NonResourceURL                                      string
	Code                                                int32
}

// String names the call as kubectl's RBAC errors do: verb group/resource/subresource "name" in namespace.
func (c AuditCall) String() string {
	if c.NonResourceURL != "" {
		return fmt.Sprintf("%s %s (%d)", c.Verb, c.NonResourceURL, c.Code)
	}
	res := c.Resource
	if c.Group != "" {
		res = c.Group + "/" + res
	}
	if c.Subresource != "" {
		res += "/" + c.Subresource
	}
	if c.Name != "" {
		res += fmt.Sprintf(" %q", c.Name)
	}
	if c.Namespace != "" {
		res += " in " + c.Namespace
	}
	return fmt.Sprintf("%s %s (%d)", c.Verb, res, c.Code)
}

// ParseAudit reads an audit log (JSON lines, audit.k8s.io/v1 Events, as --audit-log-format=json writes them) and
// returns the calls user (e.g. system:serviceaccount:syncmedic:syncmedic) made, in order, one per event. A last
// line without its newline is a write in progress and is left for the next read; a line that is not an audit Event
// is an error naming it.
func ParseAudit(r io.Reader, user string) ([]AuditCall, error) {
	var calls []AuditCall
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return calls, nil // an unterminated line is still being written
		}
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var ev auditv1.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("audit log line %d is not a JSON audit Event: %w", n, err)
		}
		if ev.Kind != "Event" || !strings.HasPrefix(ev.APIVersion, "audit.k8s.io/") {
			return nil, fmt.Errorf("audit log line %d is a %q %q, not an audit.k8s.io Event: is this an apiserver's --audit-log-path with --audit-log-format=json?", n, ev.APIVersion, ev.Kind)
		}
		if ev.User.Username != user {
			continue
		}
		c := AuditCall{Verb: ev.Verb}
		if ev.ResponseStatus != nil {
			c.Code = ev.ResponseStatus.Code
		}
		if o := ev.ObjectRef; o != nil {
			c.Group, c.Resource, c.Subresource, c.Namespace, c.Name = o.APIGroup, o.Resource, o.Subresource, o.Namespace, o.Name
		} else {
			c.NonResourceURL, _, _ = strings.Cut(ev.RequestURI, "?")
		}
		calls = append(calls, c)
	}
}

// AuditOffset is how far e's audit log is written now, at the end of its last whole line: AuditCalls from it reads
// only the requests answered after, up to it only those answered before.
func (e *Env) AuditOffset(t testing.TB) int64 {
	t.Helper()
	if e.AuditLog == "" {
		t.Fatalf("testenv: this apiserver has no audit log (RealNode and KubePrivateAudited have one)")
	}
	b, err := os.ReadFile(e.AuditLog)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatalf("testenv: the audit log: %v", err)
	}
	return int64(bytes.LastIndexByte(b, '\n') + 1)
}

// AuditCalls returns the calls user made to e's apiserver between the offsets from and to (AuditOffset; to 0: up
// to now), as its audit log recorded them (ParseAudit).
func (e *Env) AuditCalls(t testing.TB, from, to int64, user string) []AuditCall {
	t.Helper()
	if e.AuditLog == "" {
		t.Fatalf("testenv: this apiserver has no audit log (RealNode and KubePrivateAudited have one)")
	}
	b, err := os.ReadFile(e.AuditLog)
	if err != nil {
		t.Fatalf("testenv: the audit log: %v", err)
	}
	if to <= 0 || to > int64(len(b)) {
		to = int64(len(b))
	}
	if from > to {
		t.Fatalf("testenv: audit log offsets %d to %d: from after to", from, to)
	}
	calls, err := ParseAudit(bytes.NewReader(b[from:to]), user)
	if err != nil {
		t.Fatalf("testenv: %s: %v", e.AuditLog, err)
	}
	return calls
}
