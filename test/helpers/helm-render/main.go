// helm-render renders a Helm chart's templates the way `helm template` does,
// for test/deploy.test.ts on machines without a helm binary. Helm templates are
// Go text/template; this program supplies the few Sprig/Helm functions the
// model-gateway chart uses (include, required, default, quote, indent, nindent,
// trunc, trimSuffix, sha256sum, toYaml, toJson), with Sprig's semantics, using
// only the standard library. A template that calls any other function fails to
// parse, which keeps the chart within what is checked here.
//
// Input (stdin, JSON): {"chartDir", "values", "chart": {"Name", "Version",
// "AppVersion"}, "release": {"Name", "Namespace"}}. The caller parses
// Chart.yaml and values.yaml (Go's standard library has no YAML parser).
// Output (stdout, JSON): {"<chart>/templates/<file>": "<rendered text>"} for
// every template whose name does not start with "_".
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

type input struct {
	ChartDir string                 `json:"chartDir"`
	Values   map[string]interface{} `json:"values"`
	Chart    map[string]interface{} `json:"chart"`
	Release  map[string]interface{} `json:"release"`
}

// normalize turns json.Number into int64 or float64, as YAML decoding would.
func normalize(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case []interface{}:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// empty is Sprig's notion of an empty value (default, required).
func empty(v interface{}) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return r.Len() == 0
	case reflect.Bool:
		return !r.Bool()
	case reflect.Int, reflect.Int64, reflect.Int32:
		return r.Int() == 0
	case reflect.Float64, reflect.Float32:
		return r.Float() == 0
	case reflect.Ptr, reflect.Interface:
		return r.IsNil()
	}
	return false
}

func toInt(v interface{}) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	case string:
		i, _ := strconv.Atoi(x)
		return i
	}
	return 0
}

func toString(v interface{}) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

var plainKey = func(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.-/", c)) {
			return false
		}
	}
	return true
}

func yamlScalar(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		b, _ := json.Marshal(x) // a JSON string is a valid YAML double-quoted scalar
		return string(b)
	case bool, int, int64, float64:
		return fmt.Sprint(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// toYaml writes block-style YAML with sorted keys and no trailing newline, as Helm's does.
func toYaml(v interface{}) string { return strings.Join(yamlLines(v), "\n") }

func yamlLines(v interface{}) []string {
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			return []string{"{}"}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			key := k
			if !plainKey(k) {
				key = yamlScalar(k)
			}
			sub := yamlLines(x[k])
			if isContainer(x[k]) && !empty(x[k]) {
				out = append(out, key+":")
				for _, l := range sub {
					out = append(out, "  "+l)
				}
			} else {
				out = append(out, key+": "+sub[0])
			}
		}
		return out
	case []interface{}:
		if len(x) == 0 {
			return []string{"[]"}
		}
		var out []string
		for _, e := range x {
			sub := yamlLines(e)
			out = append(out, "- "+sub[0])
			for _, l := range sub[1:] {
				out = append(out, "  "+l)
			}
		}
		return out
	}
	return []string{yamlScalar(v)}
}

func isContainer(v interface{}) bool {
	switch v.(type) {
	case map[string]interface{}, []interface{}:
		return true
	}
	return false
}

func main() {
	var in input
	dec := json.NewDecoder(os.Stdin)
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		fail(err)
	}
	in.Values = normalize(in.Values).(map[string]interface{})
	in.Chart = normalize(in.Chart).(map[string]interface{})
	in.Release["Service"] = "Helm"

	name := toString(in.Chart["Name"])
	root := template.New("chart").Option("missingkey=zero")
	funcs := template.FuncMap{
		"include": func(name string, data interface{}) (string, error) {
			t := root.Lookup(name)
			if t == nil {
				return "", fmt.Errorf("include: no template %q", name)
			}
			var b bytes.Buffer
			err := t.Execute(&b, data)
			return b.String(), err
		},
		"required": func(msg string, v interface{}) (interface{}, error) {
			if empty(v) {
				return nil, errors.New(msg)
			}
			return v, nil
		},
		"default": func(d interface{}, given ...interface{}) interface{} {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"quote": func(vs ...interface{}) string {
			out := make([]string, 0, len(vs))
			for _, v := range vs {
				if v != nil {
					out = append(out, strconv.Quote(toString(v)))
				}
			}
			return strings.Join(out, " ")
		},
		"indent":  func(n interface{}, s string) string { return indent(toInt(n), s) },
		"nindent": func(n interface{}, s string) string { return "\n" + indent(toInt(n), s) },
		"trunc": func(n interface{}, s string) string {
			c := toInt(n)
			if c >= 0 && len(s) > c {
				return s[:c]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"sha256sum": func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		},
		"toYaml": toYaml,
		"toJson": func(v interface{}) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
	}
	root.Funcs(funcs)

	dir := filepath.Join(in.ChartDir, "templates")
	entries, err := os.ReadDir(dir)
	if err != nil {
		fail(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			fail(err)
		}
		tname := name + "/templates/" + e.Name()
		if _, err := root.New(tname).Parse(string(text)); err != nil {
			fail(err)
		}
		if !strings.HasPrefix(e.Name(), "_") {
			names = append(names, tname)
		}
	}
	out := map[string]string{}
	for _, tname := range names {
		data := map[string]interface{}{
			"Values":  in.Values,
			"Chart":   in.Chart,
			"Release": in.Release,
			"Template": map[string]interface{}{
				"Name":     tname,
				"BasePath": name + "/templates",
			},
		}
		var b bytes.Buffer
		if err := root.Lookup(tname).Execute(&b, data); err != nil {
			fail(err)
		}
		out[tname] = strings.ReplaceAll(b.String(), "<no value>", "")
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "helm-render:", err)
	os.Exit(1)
}
