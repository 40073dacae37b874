package snapshot

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// trickyScalars are keys and values YAML 1.1 (go-yaml v2) reads in ways that are easy to get wrong.
var trickyScalars = []string{"", "-", "--", "---", "...", "a", "1", "0x1", "0o7", "0b1", "1_000", "1:20", "1:2:3", ".5", "+.5", "5.", "1e", "e1", ".nan", ".NaN", ".inf", "-.Inf", "~", "null", "NULL", "yes", "Yes", "y", "n", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "a#b", "a #b", "a:b", "a: b", "http://x", "'q'", "\"q\"", "'", "\"", "a'b", "a\"b", "!a", "&a", "*a", "%a", "@a", "`a", "|", ">", "?", "? a", "-a", "- a", ",a", "[a", "]a", "{a", "}a", "a,b", "a]", "a}", "0", "00", "-0", "01", "08", "09.5", "1.0", "1e3", "-1e-3", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1.7976931348623157e309", "1e400", "é", "a b", "a  b", "'a''b'", "\"a\\\"b\"", "\"\\u00e9\"", "''", "\"\"", "a:", ":a", ":", "a?", "?a", "-1", "+1", "+", "0.", "-.5", "1__0", "1,000", "0xFF", "-0x1", "0777", "-0777", "1.5e+3", "123456789012345678901234567890", "3.", "true", "False", "oN", "Off", "=", "<<", "a<<", "_", "/x", "a/b:c", "a~", "x%", "a\\b", "'a' b", "\"a\" b", "[]", "{}", "[a]", "{a: b}", "[a, b]", "{a: [b]}", "[{a: b}]", "[a,b]", "{a:b}", "{a: b,}", "[,]", "{ }", "[ ]", "[a ]", "{'a': 1}", "{\"a\": 1}", "[\"a\", 'b']", "[1.5, -0, 0x1]", "[~]", "[a: b]", "{a}", "{a: }", "{a: b, a: c}", "[-]", "[- a]", "[a#b]", "[a #b]", "{a: b #c}"}

// generatedDoc writes a block mapping at column ind, nested at most depth more levels, of values from trickyScalars
// and keys from it too (one in four a plain kN).
func generatedDoc(r *rand.Rand, depth int, ind int) string {
	var b strings.Builder
	n := 1 + r.Intn(3)
	pad := strings.Repeat(" ", ind)
	for i := 0; i < n; i++ {
		k := trickyScalars[r.Intn(len(trickyScalars))]
		if r.Intn(4) == 0 {
			k = fmt.Sprintf("k%d", i)
		}
		switch x := r.Intn(6); {
		case x == 0 && depth > 0:
			fmt.Fprintf(&b, "%s%s:\n%s", pad, k, generatedDoc(r, depth-1, ind+1+r.Intn(2)))
		case x == 1 && depth > 0:
			fmt.Fprintf(&b, "%s%s:\n", pad, k)
			si := ind + r.Intn(3)
			for j := 0; j < 1+r.Intn(3); j++ {
				if r.Intn(2) == 0 {
					fmt.Fprintf(&b, "%s- %s\n", strings.Repeat(" ", si), trickyScalars[r.Intn(len(trickyScalars))])
				} else {
					d := generatedDoc(r, depth-1, si+2)
					fmt.Fprintf(&b, "%s- %s", strings.Repeat(" ", si), d[si+2:])
				}
			}
		default:
			sep := ": "
			if r.Intn(10) == 0 {
				sep = ":  "
			}
			fmt.Fprintf(&b, "%s%s%s%s\n", pad, k, sep, trickyScalars[r.Intn(len(trickyScalars))])
		}
	}
	return b.String()
}

// TestFastYAMLAgreesWithYAMLOnGeneratedDocuments: on documents built from block mappings and sequences whose keys
// and values are scalars YAML reads in surprising ways, whatever decodeYAMLFast takes on it decodes exactly as the
// reference does. The fast path must also take on a fair share of them, or the test proves nothing.
func TestFastYAMLAgreesWithYAMLOnGeneratedDocuments(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	const docs = 40000
	took := 0
	for i := 0; i < docs; i++ {
		d := generatedDoc(r, 3+i%2, 0)
		got, ok := decodeYAMLFast([]byte(d))
		if !ok {
			continue
		}
		took++
		want, err := slowYAML([]byte(d))
		require.NoError(t, err, "fast decoded %q that YAML rejects", d)
		require.Equal(t, want, interface{}(got), "doc %q", d)
	}
	require.Greater(t, took, docs/20, "the fast path took on too few documents to compare")
}
