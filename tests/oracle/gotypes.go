// The Go types of the built-in kinds, as kube-apiserver decodes a JSON-patched object into them
// (`oracle --go-types`): for each struct type reachable from client-go's scheme, named as its
// OpenAPI definition is (`io.k8s.api.core.v1.Container`), its JSON fields in declaration
// order with the type each decodes into, whether it is omitted when empty, and the Go names
// encoding/json prints in its errors. crates/structured-merge/schema/gotypes.json is this
// output; the gateway checks a JSON-patched built-in object against it as the strict decoder
// would.

package main

import (
	"encoding/json"
	"io"
	"reflect"
	"sort"
	"strings"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

type goField struct {
	Name string `json:"name"`
	// The Go names of the embedded structs the field is promoted from (encoding/json's error
	// path names them: "readinessProbe.ProbeHandler.httpGet").
	Embedded  []string `json:"embedded,omitempty"`
	Type      any      `json:"type"`
	OmitEmpty bool     `json:"omitempty,omitempty"`
	OmitZero  bool     `json:"omitzero,omitempty"`
}

type goStruct struct {
	// The name encoding/json prints as the struct of a field ("Container").
	Go     string    `json:"go"`
	Fields []goField `json:"fields"`
}

// Types whose JSON form their own (Un)MarshalJSON decides.
var goSpecials = map[string]string{
	"k8s.io/apimachinery/pkg/api/resource.Quantity":                  "quantity",
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString":                "int-or-string",
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":                      "time",
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":                 "micro-time",
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":                  "duration",
	"k8s.io/apimachinery/pkg/runtime.RawExtension":                   "raw",
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":                  "raw",
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.Unstructured": "raw",
}

// openAPIName: the OpenAPI definition name of a Go type (k8s.io/api/core/v1.Pod →
// io.k8s.api.core.v1.Pod).
func openAPIName(t reflect.Type) string {
	path := t.PkgPath()
	parts := strings.SplitN(path, "/", 2)
	host := strings.Split(parts[0], ".")
	for i, j := 0, len(host)-1; i < j; i, j = i+1, j-1 {
		host[i], host[j] = host[j], host[i]
	}
	name := strings.Join(host, ".")
	if len(parts) == 2 {
		name += "." + strings.ReplaceAll(parts[1], "/", ".")
	}
	return name + "." + t.Name()
}

type goTypes struct {
	Structs map[string]goStruct          `json:"structs"`
	Kinds   map[string]map[string]string `json:"kinds"`
}

func (g *goTypes) ref(t reflect.Type) any {
	if t.Name() != "" && t.PkgPath() != "" {
		if special, ok := goSpecials[t.PkgPath()+"."+t.Name()]; ok {
			return map[string]any{"special": special, "go": t.String()}
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return map[string]any{"ptr": g.ref(t.Elem())}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"special": "bytes", "go": t.String()}
		}
		return map[string]any{"slice": g.ref(t.Elem()), "go": t.String()}
	case reflect.Map:
		return map[string]any{"map": g.ref(t.Elem()), "key": t.Key().String(), "go": t.String()}
	case reflect.Struct:
		name := openAPIName(t)
		if _, seen := g.Structs[name]; !seen {
			g.Structs[name] = goStruct{Go: t.Name()}
			g.Structs[name] = goStruct{Go: t.Name(), Fields: g.fields(t)}
		}
		return map[string]any{"struct": name, "go": t.String()}
	case reflect.Interface:
		return map[string]any{"special": "raw", "go": t.String()}
	default:
		return map[string]any{"scalar": t.Kind().String(), "go": t.String()}
	}
}

// fields: encoding/json's view of a struct: tagged names, `-` skipped, embedded structs
// without a name inlined (`json:",inline"` is an untagged embedding for encoding/json).
func (g *goTypes) fields(t reflect.Type) []goField {
	out := []goField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				for _, promoted := range g.fields(inner) {
					promoted.Embedded = append([]string{f.Name}, promoted.Embedded...)
					out = append(out, promoted)
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, goField{
			Name:      name,
			Type:      g.ref(f.Type),
			OmitEmpty: strings.Contains(","+opts+",", ",omitempty,"),
			OmitZero:  strings.Contains(","+opts+",", ",omitzero,"),
		})
	}
	return out
}

func dumpGoTypes(w io.Writer) error {
	g := &goTypes{Structs: map[string]goStruct{}, Kinds: map[string]map[string]string{}}
	known := clientgoscheme.Scheme.AllKnownTypes()
	gvks := make([]string, 0, len(known))
	for gvk := range known {
		gvks = append(gvks, gvk.String())
	}
	sort.Strings(gvks)
	for gvk, t := range known {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		ref := g.ref(t).(map[string]any)
		apiVersion := gvk.GroupVersion().String()
		if g.Kinds[apiVersion] == nil {
			g.Kinds[apiVersion] = map[string]string{}
		}
		g.Kinds[apiVersion][gvk.Kind] = ref["struct"].(string)
	}
	encoder := json.NewEncoder(w)
	return encoder.Encode(g)
}
