package snapshot

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
)

// appendJSON appends the JSON of a value an unstructured object holds (nil, bool, string, int64, float64,
// []interface{}, map[string]interface{}) byte for byte as json.Marshal writes it (map keys sorted), without
// reflection; any other value, and any string that needs escaping, is left to json.Marshal.
func appendJSON(b []byte, v interface{}) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, t), nil
	case string:
		return appendJSONString(b, t)
	case int64:
		return strconv.AppendInt(b, t, 10), nil
	case float64:
		return appendJSONFloat(b, t)
	case []interface{}:
		b = append(b, '[')
		for i, x := range t {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]interface{}:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSONString(b, k); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendJSON(b, t[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, js...), nil
}

// appendJSONString writes s quoted when it has nothing to escape (printable ASCII but '"', '\\' and the characters
// json.Marshal escapes for HTML), else as json.Marshal writes it.
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			js, err := json.Marshal(s)
			if err != nil {
				return nil, err
			}
			return append(b, js...), nil
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// appendJSONFloat writes f as json.Marshal does (encoding/json's floatEncoder for 64 bits).
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return json.Marshal(f) // the same error json.Marshal gives
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
