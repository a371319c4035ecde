// The upstream oracle: kube-apiserver's own admission code (k8s.io/apiserver, the version
// tests/oracle/provision.sh built it against) run in-process on one case at a time, so the
// gateway's decisions can be compared with upstream's (tests/integration/oracle.rs).
//
// It runs, as kube-apiserver builds them:
//   - the ValidatingAdmissionPolicy plugin (validating.NewPlugin), over a fake clientset and
//     informers seeded with the case's configuration (policies, bindings, Namespaces,
//     ConfigMaps, Secrets), inside the audit context and the warning recorder of the server's
//     handler chain (admission.WithAudit, endpoints/filters.WithWarningRecorder);
//   - the matchConditions of each webhook of a ValidatingWebhookConfiguration or
//     MutatingWebhookConfiguration, compiled as the webhook plugin compiles them (its
//     ConditionCompiler over the base environment) and matched on the request;
//   - in mode "webhooks" (a case's "mode" field, or --webhooks by hand; compared by
//     tests/integration/oracle_webhooks.rs and oracle_mutating.rs), the mutating phase and the
//     webhook dispatchers instead: the MutatingAdmissionPolicy plugin (the configuration's
//     MutatingAdmissionPolicies and bindings, ConfigMaps as params), the
//     MutatingAdmissionWebhook plugin, then the ValidatingAdmissionWebhook plugin on the mutated
//     object, chained and reinvoked as kube-apiserver does (runWebhooks below: one reinvocation
//     round for the whole chain), calling the configuration's webhooks for real
//     (clientConfig.url with its caBundle; the case's Namespaces for namespaceSelectors and
//     namespaceObject). The policy plugin's type converters (its ApplyConfiguration merges)
//     are built, as kube-apiserver builds them, from OpenAPI v3 documents a kube-apiserver
//     served (openAPIClient: client-go's openapitest documents for api/v1, apis/apps/v1,
//     apis/batch/v1, ...), read through a discovery client of the fake clientset.
//
// What the server supplies and is not packaged is supplied here: the REST mapper (the kinds of
// the case), the authorizer (one that cannot decide, as the gateway outside cluster mode) and
// the v1 defaulting of the manifests (defaultPolicy() and the like below). The request's
// objects are handed to the plugins unstructured, as the API server hands a custom resource,
// unless a mode-"webhooks" case says "objects": "typed": then a built-in kind is decoded
// strictly into client-go's Go type and created and converted through client-go's scheme, as
// kube-apiserver holds it (attributesHeld, webhookObjectInterfaces); client-go's scheme has no
// defaulters, so nothing is defaulted. Mode "encode" answers a review's object in that typed
// encoding (what the API server would send), and --go-types prints the Go types of client-go's
// kinds for the gateway's typed round trip (gotypes.go).
//
// Usage:
//
//	oracle [-j N] < cases.jsonl               one JSON line in per case, one JSON line out, in order
//	oracle --review REVIEW.json CONFIG...     one case by hand: the configuration's files or
//	                                          directories (YAML or JSON), the answer indented
//	oracle --webhooks --review REVIEW.json CONFIG...
//	                                          the same in mode "webhooks"
//	oracle --version                          the upstream version it runs
//	oracle --go-types                         crates/structured-merge/schema/gotypes.json
//
// A case: {"config": [<objects>...], "review": <AdmissionReview v1>, "mode": "webhooks"|"encode"?,
// "objects": "typed"?, "openapi": {<path>: <OpenAPI v3 document>}?}. An
// answer: {"upstream", "allowed", "code", "reason", "message", "warnings", "auditAnnotations",
// "webhooks": [{"name", "match": "true|false|error", "condition", "error"}], "refused", "error"};
// in mode "webhooks" "webhooks" is empty, "auditAnnotations" are those recorded at audit level
// Request (the patch annotations included), and "object" is the request's object after the
// mutating webhooks (absent for a request without one). A mode-"webhooks" configuration holds
// webhook configurations and Namespaces only.
// "refused" is a policy or webhook the API server would refuse at creation (an expression that
// does not compile in the stored-expression environment); "error" is the oracle's own failure
// to run the case (bad input), never a decision. Nothing but these lines goes to standard output,
// and the objects of a case never appear outside its answer.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	policymutating "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	mutatingpatch "k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
	"k8s.io/klog/v2"
)

// Set at build time (tests/oracle/provision.sh, -ldflags -X).
var (
	apiserverVersion = "(unknown version)"
	debianVersion    = "unknown"
	// The OpenAPI v3 documents the MutatingAdmissionPolicy plugin builds its type converters
	// from (openAPIClient below).
	openapiDir = ""
)

// What the answers name as the upstream they ran.
var upstreamVersion = "k8s.io/apiserver " + apiserverVersion

type caseIn struct {
	Config []json.RawMessage `json:"config"`
	Review json.RawMessage   `json:"review"`
	// "webhooks": run the webhook dispatchers (runWebhooks) instead of the policies.
	Mode string `json:"mode,omitempty"`
	// More OpenAPI v3 documents the API server serves, by path ("apis/example.com/v1"):
	// custom resources' schemas for the MutatingAdmissionPolicy plugin's type converters.
	OpenAPI map[string]json.RawMessage `json:"openapi,omitempty"`
	// Mode "webhooks": how the request's objects are held, "typed" (a built-in kind as its Go
	// type, as kube-apiserver holds it) or "unstructured" (the default).
	Objects string `json:"objects,omitempty"`
}

type webhookOut struct {
	Name      string `json:"name"`
	Match     string `json:"match"`
	Condition string `json:"condition,omitempty"`
	Error     string `json:"error,omitempty"`
}

type caseOut struct {
	Upstream         string            `json:"upstream"`
	Allowed          bool              `json:"allowed"`
	Code             int32             `json:"code"`
	Reason           string            `json:"reason"`
	Message          string            `json:"message"`
	Warnings         []string          `json:"warnings"`
	AuditAnnotations map[string]string `json:"auditAnnotations"`
	Webhooks         []webhookOut      `json:"webhooks"`
	Refused          string            `json:"refused,omitempty"`
	Error            string            `json:"error,omitempty"`
	// Mode "webhooks": the request's object after the mutating webhooks (absent when the
	// request has none, e.g. a DELETE).
	Object json.RawMessage `json:"object,omitempty"`
	// With -bench: the process's CPU time (user and system, GC included) per Validate call
	// over that many calls after the first, and their wall time.
	BenchCalls       int   `json:"benchCalls,omitempty"`
	CPUNanosPerCall  int64 `json:"cpuNanosPerCall,omitempty"`
	WallNanosPerCall int64 `json:"wallNanosPerCall,omitempty"`
}

// benchRounds: --bench.
var benchRounds int

// cpuNanos is the process's user and system time so far.
func cpuNanos() int64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return usage.Utime.Nano() + usage.Stime.Nano()
}

func main() {
	version := flag.Bool("version", false, "print the upstream version and exit")
	jobs := flag.Int("j", 4*runtime.GOMAXPROCS(0), "cases run at the same time")
	reviewFile := flag.String("review", "", "run one case: this AdmissionReview (JSON) against the configuration files and directories given as arguments")
	webhooksMode := flag.Bool("webhooks", false, "with --review: run the webhook dispatchers on the case (mode \"webhooks\") instead of the policies")
	goTypesDump := flag.Bool("go-types", false, "print the Go types of client-go's kinds as crates/structured-merge/schema/gotypes.json holds them, and exit")
	flag.IntVar(&benchRounds, "bench", 0, "with --review: run the plugin's Validate this many more times and print the CPU time per call (the load test's upstream figure)")
	flag.Parse()
	if *version {
		fmt.Printf("%s (Debian golang-k8s-apiserver-dev %s)\n", upstreamVersion, debianVersion)
		return
	}
	if *goTypesDump {
		if err := dumpGoTypes(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *reviewFile != "" {
		quiet()
		mode := ""
		if *webhooksMode {
			mode = "webhooks"
		}
		if err := byHand(*reviewFile, mode, flag.Args(), os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "oracle: cases are read from standard input (JSON lines); no arguments")
		os.Exit(2)
	}
	quiet()
	if err := batch(os.Stdin, os.Stdout, max(*jobs, 1)); err != nil {
		fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
		os.Exit(1)
	}
}

// quiet keeps upstream's logs (klog, HandleError) off the output: they could quote a case.
func quiet() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	utilruntime.ErrorHandlers = nil
}

// byHand runs one case read from files and prints its answer, indented.
func byHand(reviewFile, mode string, paths []string, out io.Writer) error {
	review, err := os.ReadFile(reviewFile)
	if err != nil {
		return err
	}
	in := caseIn{Review: review, Mode: mode}
	for _, path := range paths {
		files := []string{path}
		if info, err := os.Stat(path); err != nil {
			return err
		} else if info.IsDir() {
			files = nil
			entries, err := os.ReadDir(path)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if name := e.Name(); !e.IsDir() && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".json")) {
					files = append(files, filepath.Join(path, name))
				}
			}
		}
		for _, file := range files {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
			for {
				var raw json.RawMessage
				if err := decoder.Decode(&raw); err == io.EOF {
					break
				} else if err != nil {
					f.Close()
					return fmt.Errorf("%s: %v", file, err)
				}
				if t := bytes.TrimSpace(raw); len(t) > 0 && string(t) != "null" {
					in.Config = append(in.Config, raw)
				}
			}
			f.Close()
		}
	}
	answer, err := runCase(in)
	if err != nil {
		return err
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, encode(answer), "", "  "); err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, indented.String())
	return err
}

// batch answers each input line, `jobs` at a time, in the input's order.
func batch(in io.Reader, out io.Writer, jobs int) error {
	reader := bufio.NewReaderSize(in, 1<<20)
	writer := bufio.NewWriter(out)
	defer writer.Flush()
	type pending struct{ answer chan []byte }
	queue := make(chan pending, jobs)
	slots := make(chan struct{}, jobs)
	done := make(chan error, 1)
	go func() {
		for p := range queue {
			if _, err := writer.Write(append(<-p.answer, '\n')); err != nil {
				done <- err
				return
			}
			if len(queue) == 0 {
				writer.Flush()
			}
		}
		done <- writer.Flush()
	}()
	line := 0
	for {
		text, err := reader.ReadBytes('\n')
		if len(bytes.TrimSpace(text)) > 0 {
			line++
			p := pending{answer: make(chan []byte, 1)}
			queue <- p
			slots <- struct{}{}
			go func(text []byte, line int) {
				defer func() { <-slots }()
				p.answer <- encode(runLine(text, line))
			}(text, line)
		}
		if err == io.EOF {
			break
		} else if err != nil {
			close(queue)
			<-done
			return fmt.Errorf("reading standard input: %w", err)
		}
	}
	close(queue)
	return <-done
}

func encode(out caseOut) []byte {
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	if out.AuditAnnotations == nil {
		out.AuditAnnotations = map[string]string{}
	}
	if out.Webhooks == nil {
		out.Webhooks = []webhookOut{}
	}
	text, err := json.Marshal(out)
	if err != nil {
		text, _ = json.Marshal(caseOut{Upstream: upstreamVersion, Error: "encoding the answer: " + err.Error()})
	}
	return text
}

func runLine(text []byte, line int) (out caseOut) {
	defer func() {
		if r := recover(); r != nil {
			out = caseOut{Upstream: upstreamVersion, Error: fmt.Sprintf("line %d: upstream code panicked: %v", line, r)}
		}
	}()
	var in caseIn
	decoder := json.NewDecoder(bytes.NewReader(text))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&in); err != nil {
		return caseOut{Upstream: upstreamVersion, Error: fmt.Sprintf("line %d: not a case {\"config\": [...], \"review\": {...}}: %v", line, err)}
	}
	out, err := runCase(in)
	if err != nil {
		return caseOut{Upstream: upstreamVersion, Error: fmt.Sprintf("line %d: %v", line, err)}
	}
	return out
}

// The case's configuration, typed.
type config struct {
	policies   []*admissionregistrationv1.ValidatingAdmissionPolicy
	bindings   []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	mpolicies  []*admissionregistrationv1.MutatingAdmissionPolicy
	mbindings  []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	objects    []k8sruntime.Object // Namespaces, ConfigMaps, Secrets
}

func strictDecode(raw []byte, into any) error {
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	return decoder.Decode(into)
}

func parseConfig(raws []json.RawMessage) (*config, error) {
	c := &config{}
	for i, raw := range raws {
		var head metav1.TypeMeta
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("config[%d]: not a Kubernetes object: %v", i, err)
		}
		var obj any
		switch head.APIVersion + "/" + head.Kind {
		case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			c.policies, obj = append(c.policies, p), p
		case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding":
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			c.bindings, obj = append(c.bindings, b), b
		case "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy":
			p := &admissionregistrationv1.MutatingAdmissionPolicy{}
			c.mpolicies, obj = append(c.mpolicies, p), p
		case "admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding":
			b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
			c.mbindings, obj = append(c.mbindings, b), b
		case "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration":
			w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			c.validating, obj = append(c.validating, w), w
		case "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration":
			w := &admissionregistrationv1.MutatingWebhookConfiguration{}
			c.mutating, obj = append(c.mutating, w), w
		case "v1/Namespace":
			o := &corev1.Namespace{}
			c.objects, obj = append(c.objects, o), o
		case "v1/ConfigMap":
			o := &corev1.ConfigMap{}
			c.objects, obj = append(c.objects, o), o
		case "v1/Secret":
			o := &corev1.Secret{}
			c.objects, obj = append(c.objects, o), o
		default:
			return nil, fmt.Errorf("config[%d]: %s %s is not a kind the oracle takes (admissionregistration.k8s.io/v1 policies, bindings and webhook configurations; v1 Namespace, ConfigMap, Secret)", i, head.APIVersion, head.Kind)
		}
		if err := strictDecode(raw, obj); err != nil {
			return nil, fmt.Errorf("config[%d] (%s): %v", i, head.Kind, err)
		}
	}
	for _, p := range c.policies {
		defaultPolicy(p)
	}
	for _, b := range c.bindings {
		if b.Spec.MatchResources != nil {
			defaultMatchResources(b.Spec.MatchResources)
		}
	}
	for _, p := range c.mpolicies {
		if p.Spec.FailurePolicy == nil {
			fail := admissionregistrationv1.Fail
			p.Spec.FailurePolicy = &fail
		}
		if p.Spec.MatchConstraints != nil {
			defaultMatchResources(p.Spec.MatchConstraints)
		}
	}
	for _, b := range c.mbindings {
		if b.Spec.MatchResources != nil {
			defaultMatchResources(b.Spec.MatchResources)
		}
	}
	for _, w := range c.validating {
		for i := range w.Webhooks {
			h := &w.Webhooks[i]
			defaultWebhook(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, h.Rules)
			defaultTimeout(&h.TimeoutSeconds)
		}
	}
	for _, w := range c.mutating {
		for i := range w.Webhooks {
			h := &w.Webhooks[i]
			defaultWebhook(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, h.Rules)
			defaultTimeout(&h.TimeoutSeconds)
			if h.ReinvocationPolicy == nil {
				never := admissionregistrationv1.NeverReinvocationPolicy
				h.ReinvocationPolicy = &never
			}
		}
	}
	return c, nil
}

// kube-apiserver's v1 defaults (kubernetes pkg/apis/admissionregistration/v1/defaults.go, not
// packaged) for the fields the plugin reads.
func defaultPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	if p.Spec.MatchConstraints != nil {
		defaultMatchResources(p.Spec.MatchConstraints)
	}
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m.MatchPolicy == nil {
		equivalent := admissionregistrationv1.Equivalent
		m.MatchPolicy = &equivalent
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				all := admissionregistrationv1.AllScopes
				rules[i].Scope = &all
			}
		}
	}
}

func defaultWebhook(fp **admissionregistrationv1.FailurePolicyType, mp **admissionregistrationv1.MatchPolicyType, ns, obj **metav1.LabelSelector, rules []admissionregistrationv1.RuleWithOperations) {
	if *fp == nil {
		fail := admissionregistrationv1.Fail
		*fp = &fail
	}
	if *mp == nil {
		equivalent := admissionregistrationv1.Equivalent
		*mp = &equivalent
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *obj == nil {
		*obj = &metav1.LabelSelector{}
	}
	for i := range rules {
		if rules[i].Scope == nil {
			all := admissionregistrationv1.AllScopes
			rules[i].Scope = &all
		}
	}
}

// timeoutSeconds' v1 default (kubernetes pkg/apis/admissionregistration/v1/defaults.go).
func defaultTimeout(t **int32) {
	if *t == nil {
		ten := int32(10)
		*t = &ten
	}
}

// refusal: the first expression of the configuration that the API server would refuse at
// creation: compiled in the stored-expression environment's stricter sibling
// (environment.NewExpressions), as kubernetes' validation.go compiles a new policy's. A
// matchCondition is compiled trimmed, as validation.go's validateMatchCondition compiles it.
func refusal(c *config) string {
	// The two structural rules of validation.go a case can break (the rest it is written to
	// meet): the reasons a validation may give and the validationActions a binding may list.
	for _, p := range c.policies {
		for i, v := range p.Spec.Validations {
			if v.Reason != nil && *v.Reason != metav1.StatusReasonForbidden && *v.Reason != metav1.StatusReasonInvalid && *v.Reason != metav1.StatusReasonRequestEntityTooLarge {
				return fmt.Sprintf("ValidatingAdmissionPolicy %q: spec.validations[%d].reason: Unsupported value: %q", p.Name, i, *v.Reason)
			}
		}
	}
	for _, b := range c.bindings {
		seen := map[admissionregistrationv1.ValidationAction]bool{}
		for i, a := range b.Spec.ValidationActions {
			if a != admissionregistrationv1.Deny && a != admissionregistrationv1.Warn && a != admissionregistrationv1.Audit {
				return fmt.Sprintf("ValidatingAdmissionPolicyBinding %q: spec.validationActions[%d]: Unsupported value: %q", b.Name, i, a)
			}
			if seen[a] {
				return fmt.Sprintf("ValidatingAdmissionPolicyBinding %q: spec.validationActions[%d]: Duplicate value: %q", b.Name, i, a)
			}
			seen[a] = true
		}
		if len(b.Spec.ValidationActions) == 0 {
			return fmt.Sprintf("ValidatingAdmissionPolicyBinding %q: spec.validationActions: Required value", b.Name)
		}
		if seen[admissionregistrationv1.Deny] && seen[admissionregistrationv1.Warn] {
			return fmt.Sprintf("ValidatingAdmissionPolicyBinding %q: spec.validationActions: Invalid value: must not contain both Deny and Warn", b.Name)
		}
	}
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	for _, p := range c.policies {
		compiler, err := plugincel.NewCompositedCompiler(base)
		if err != nil {
			return fmt.Sprintf("ValidatingAdmissionPolicy %q: %v", p.Name, err)
		}
		vars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
		noAuthz := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: false}
		check := func(field string, result plugincel.CompilationResult) string {
			if result.Error != nil {
				return fmt.Sprintf("ValidatingAdmissionPolicy %q: %s: %s", p.Name, field, result.Error.Detail)
			}
			return ""
		}
		if why := compileShared(compiler, vars, check, p.Spec.Variables, p.Spec.MatchConditions); why != "" {
			return why
		}
		for i, v := range p.Spec.Validations {
			r := compiler.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}, vars, environment.NewExpressions)
			if why := check(fmt.Sprintf("spec.validations[%d].expression", i), r); why != "" {
				return why
			}
			if v.MessageExpression != "" {
				r := compiler.CompileCELExpression(&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}, noAuthz, environment.NewExpressions)
				if why := check(fmt.Sprintf("spec.validations[%d].messageExpression", i), r); why != "" {
					return why
				}
			}
		}
		for i, a := range p.Spec.AuditAnnotations {
			r := compiler.CompileCELExpression(&validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}, vars, environment.NewExpressions)
			if why := check(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), r); why != "" {
				return why
			}
		}
	}
	// MutatingAdmissionPolicies: their variables, matchConditions and mutations compiled as
	// for a new policy, the mutations with the patch types declared and each against the
	// result type its patchType requires (list(JSONPatch) or Object).
	for _, p := range c.mpolicies {
		compiler, err := plugincel.NewCompositedCompiler(base)
		if err != nil {
			return fmt.Sprintf("MutatingAdmissionPolicy %q: %v", p.Name, err)
		}
		vars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
		check := func(field string, result plugincel.CompilationResult) string {
			if result.Error != nil {
				return fmt.Sprintf("MutatingAdmissionPolicy %q: %s: %s", p.Name, field, result.Error.Detail)
			}
			return ""
		}
		if why := compileShared(compiler, vars, check, p.Spec.Variables, p.Spec.MatchConditions); why != "" {
			return why
		}
		patchVars := vars
		patchVars.HasPatchTypes = true
		for i, m := range p.Spec.Mutations {
			var accessor plugincel.ExpressionAccessor
			field := ""
			switch {
			case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
				accessor, field = &mutatingpatch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, "jsonPatch"
			case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
				accessor, field = &mutatingpatch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, "applyConfiguration"
			default:
				continue
			}
			evaluator := compiler.CompileMutatingEvaluator(accessor, patchVars, environment.NewExpressions)
			if errs := evaluator.CompilationErrors(); len(errs) > 0 {
				return fmt.Sprintf("MutatingAdmissionPolicy %q: spec.mutations[%d].%s.expression: %v", p.Name, i, field, errs[0])
			}
		}
	}
	compiler := plugincel.NewCompiler(base)
	vars := plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	for _, w := range c.validating {
		for i, h := range w.Webhooks {
			for j, m := range h.MatchConditions {
				r := compiler.CompileCELExpression(&matchconditions.MatchCondition{Name: m.Name, Expression: strings.TrimSpace(m.Expression)}, vars, environment.NewExpressions)
				if r.Error != nil {
					return fmt.Sprintf("ValidatingWebhookConfiguration %q: webhooks[%d].matchConditions[%d].expression: %s", w.Name, i, j, r.Error.Detail)
				}
			}
		}
	}
	for _, w := range c.mutating {
		for i, h := range w.Webhooks {
			for j, m := range h.MatchConditions {
				r := compiler.CompileCELExpression(&matchconditions.MatchCondition{Name: m.Name, Expression: strings.TrimSpace(m.Expression)}, vars, environment.NewExpressions)
				if r.Error != nil {
					return fmt.Sprintf("MutatingWebhookConfiguration %q: webhooks[%d].matchConditions[%d].expression: %s", w.Name, i, j, r.Error.Detail)
				}
			}
		}
	}
	return ""
}

// compileShared compiles a policy's variables (stored, in order) and matchConditions (trimmed,
// as validation.go's validateMatchCondition compiles them), both kinds of policy alike.
func compileShared(compiler *plugincel.CompositedCompiler, vars plugincel.OptionalVariableDeclarations, check func(string, plugincel.CompilationResult) string, variables []admissionregistrationv1.Variable, conditions []admissionregistrationv1.MatchCondition) string {
	for i, v := range variables {
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, vars, environment.NewExpressions)
		if why := check(fmt.Sprintf("spec.variables[%d].expression", i), r); why != "" {
			return why
		}
	}
	for i, m := range conditions {
		r := compiler.CompileCELExpression(&matchconditions.MatchCondition{Name: m.Name, Expression: strings.TrimSpace(m.Expression)}, vars, environment.NewExpressions)
		if why := check(fmt.Sprintf("spec.matchConditions[%d].expression", i), r); why != "" {
			return why
		}
	}
	return ""
}

// The AdmissionReview's request, as the API server would have built its attributes.
func attributesOf(raw json.RawMessage) (admission.Attributes, schema.GroupVersionKind, schema.GroupVersionResource, error) {
	return attributesHeld(raw, false)
}

// attributesHeld is attributesOf with the request's object and old object held typed when
// `typed` and their kind is one of client-go's scheme (typedOf), unstructured otherwise.
func attributesHeld(raw json.RawMessage, typed bool) (admission.Attributes, schema.GroupVersionKind, schema.GroupVersionResource, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &review); err != nil {
		return nil, schema.GroupVersionKind{}, schema.GroupVersionResource{}, fmt.Errorf("review: not an AdmissionReview: %v", err)
	}
	r := review.Request
	if r == nil {
		return nil, schema.GroupVersionKind{}, schema.GroupVersionResource{}, errors.New("review: no request")
	}
	object, err := unstructuredOf(r.Object.Raw)
	if err != nil {
		return nil, schema.GroupVersionKind{}, schema.GroupVersionResource{}, fmt.Errorf("review: request.object: %v", err)
	}
	oldObject, err := unstructuredOf(r.OldObject.Raw)
	if err != nil {
		return nil, schema.GroupVersionKind{}, schema.GroupVersionResource{}, fmt.Errorf("review: request.oldObject: %v", err)
	}
	options, err := unstructuredOf(r.Options.Raw)
	if err != nil {
		return nil, schema.GroupVersionKind{}, schema.GroupVersionResource{}, fmt.Errorf("review: request.options: %v", err)
	}
	kind := schema.GroupVersionKind{Group: r.Kind.Group, Version: r.Kind.Version, Kind: r.Kind.Kind}
	resource := schema.GroupVersionResource{Group: r.Resource.Group, Version: r.Resource.Version, Resource: r.Resource.Resource}
	extra := map[string][]string{}
	for k, v := range r.UserInfo.Extra {
		extra[k] = v
	}
	userInfo := &user.DefaultInfo{Name: r.UserInfo.Username, UID: r.UserInfo.UID, Groups: r.UserInfo.Groups, Extra: extra}
	dryRun := r.DryRun != nil && *r.DryRun
	var obj, old, opts k8sruntime.Object
	if object != nil {
		obj = object
		if typed {
			if obj, err = typedOf(object, kind); err != nil {
				return nil, schema.GroupVersionKind{}, schema.GroupVersionResource{}, fmt.Errorf("review: request.object: %v", err)
			}
		}
	}
	if oldObject != nil {
		old = oldObject
		if typed {
			if old, err = typedOf(oldObject, kind); err != nil {
				return nil, schema.GroupVersionKind{}, schema.GroupVersionResource{}, fmt.Errorf("review: request.oldObject: %v", err)
			}
		}
	}
	if options != nil {
		opts = options
	}
	attrs := admission.NewAttributesRecord(obj, old, kind, r.Namespace, r.Name, resource, r.SubResource,
		admission.Operation(r.Operation), opts, dryRun, userInfo)
	return attrs, kind, resource, nil
}

// unstructuredOf decodes an object as the API server's unstructured decoder does (integers as
// int64, other numbers as float64); nil for an absent or null object.
func unstructuredOf(raw []byte) (*unstructured.Unstructured, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var content map[string]any
	if err := utiljson.Unmarshal(raw, &content); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: content}, nil
}

// typedOf: the object as kube-apiserver holds a built-in kind, the Go type of client-go's
// scheme for its apiVersion and kind (the request's kind when it names none), decoded strictly
// (a field the type does not have is the case's mistake: kube-apiserver never sends one); the
// object itself when the scheme does not know the kind (a custom resource).
func typedOf(u *unstructured.Unstructured, requestKind schema.GroupVersionKind) (k8sruntime.Object, error) {
	gvk := u.GroupVersionKind()
	if gvk.Empty() {
		gvk = requestKind
	}
	if !clientgoscheme.Scheme.Recognizes(gvk) {
		return u, nil
	}
	into, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	strict := serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, clientgoscheme.Scheme, clientgoscheme.Scheme, serializerjson.SerializerOptions{Strict: true})
	obj, _, err := strict.Decode(raw, &gvk, into)
	if err != nil {
		return nil, fmt.Errorf("not a valid %s: %v", gvk.Kind, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// noAuthorizer answers every check with an error: the gateway outside cluster mode has no
// authorizer (docs/differences.md, "authorizer"); the plugin refuses a nil one.
type noAuthorizer struct{}

func (noAuthorizer) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", errors.New("no authorizer outside cluster mode")
}

// The REST mapper: the core kinds, the kinds of the config's param kinds, and the request's.
func restMapper(c *config, kind schema.GroupVersionKind, resource schema.GroupVersionResource, namespaced bool) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	add := func(gvk schema.GroupVersionKind, plural string, scope meta.RESTScope) {
		m.AddSpecific(gvk, gvk.GroupVersion().WithResource(plural), gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind)), scope)
	}
	core := corev1.SchemeGroupVersion
	add(core.WithKind("Namespace"), "namespaces", meta.RESTScopeRoot)
	add(core.WithKind("Node"), "nodes", meta.RESTScopeRoot)
	add(core.WithKind("ConfigMap"), "configmaps", meta.RESTScopeNamespace)
	add(core.WithKind("Secret"), "secrets", meta.RESTScopeNamespace)
	add(core.WithKind("Pod"), "pods", meta.RESTScopeNamespace)
	add(core.WithKind("Service"), "services", meta.RESTScopeNamespace)
	add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", meta.RESTScopeNamespace)
	if kind.Kind != "" && resource.Resource != "" {
		scope := meta.RESTScopeRoot
		if namespaced {
			scope = meta.RESTScopeNamespace
		}
		if _, err := m.RESTMapping(kind.GroupKind(), kind.Version); err != nil {
			m.AddSpecific(kind, resource, resource.GroupVersion().WithResource(strings.ToLower(kind.Kind)), scope)
		}
	}
	return m
}

func runCase(in caseIn) (caseOut, error) {
	out := caseOut{Upstream: upstreamVersion}
	c, err := parseConfig(in.Config)
	if err != nil {
		return out, err
	}
	if why := refusal(c); why != "" {
		out.Refused = why
		return out, nil
	}
	switch in.Mode {
	case "":
	case "webhooks":
		return runWebhooks(in, c)
	case "encode":
		// The request's object in the encoding kube-apiserver sends a built-in kind in (its Go
		// type's), to write a case's review as the API server would.
		attrs, _, _, err := attributesHeld(in.Review, true)
		if err != nil {
			return out, err
		}
		if attrs.GetObject() != nil {
			if out.Object, err = json.Marshal(attrs.GetObject()); err != nil {
				return out, err
			}
		}
		return out, nil
	default:
		return out, fmt.Errorf("mode %q: the oracle knows \"webhooks\" (and none, the policies)", in.Mode)
	}
	attrs, kind, resource, err := attributesOf(in.Review)
	if err != nil {
		return out, err
	}
	for _, p := range c.policies {
		if p.Spec.ParamKind != nil {
			gv, err := schema.ParseGroupVersion(p.Spec.ParamKind.APIVersion)
			if err != nil || gv != corev1.SchemeGroupVersion || (p.Spec.ParamKind.Kind != "ConfigMap" && p.Spec.ParamKind.Kind != "Secret" && p.Spec.ParamKind.Kind != "Namespace") {
				return out, fmt.Errorf("policy %q: paramKind %s %s: the oracle takes v1 ConfigMap, Secret and Namespace parameters", p.Name, p.Spec.ParamKind.APIVersion, p.Spec.ParamKind.Kind)
			}
		}
	}

	seeded := append([]k8sruntime.Object{}, c.objects...)
	for _, p := range c.policies {
		seeded = append(seeded, p)
	}
	for _, b := range c.bindings {
		seeded = append(seeded, b)
	}
	client := fake.NewSimpleClientset(seeded...)
	factory := informers.NewSharedInformerFactory(client, 0)
	dynamicClient := dynamicfake.NewSimpleDynamicClient(clientgoscheme.Scheme)
	stop := make(chan struct{})
	defer close(stop)

	plugin, err := validating.NewPlugin(nil)
	if err != nil {
		return out, fmt.Errorf("validating.NewPlugin: %v", err)
	}
	plugin.SetExternalKubeInformerFactory(factory)
	plugin.SetExternalKubeClientSet(client)
	plugin.SetRESTMapper(restMapper(c, kind, resource, attrs.GetNamespace() != ""))
	plugin.SetDynamicClient(dynamicClient)
	plugin.SetDrainedNotification(stop)
	plugin.SetAuthorizer(noAuthorizer{})
	if err := plugin.ValidateInitialization(); err != nil {
		return out, fmt.Errorf("ValidatingAdmissionPolicy plugin: %v", err)
	}
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	// The server's handler chain around admission: the audit context (level Metadata, where
	// the policies' annotations are recorded) and the warning recorder.
	var validateErr error
	var annotations map[string]string
	handler := filters.WithWarningRecorder(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := audit.WithAuditContext(r.Context())
		ac := audit.AuditContextFrom(ctx)
		_ = ac.Init(audit.RequestAuditConfig{Level: auditinternal.LevelMetadata}, nil)
		objectInterfaces := admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme)
		validateErr = admission.WithAudit(plugin).(admission.ValidationInterface).Validate(ctx, attrs, objectInterfaces)
		annotations = ac.GetEventAnnotations()
		if benchRounds > 0 {
			cpu, wall := cpuNanos(), time.Now()
			for i := 0; i < benchRounds; i++ {
				_ = plugin.Validate(ctx, attrs, objectInterfaces)
			}
			out.BenchCalls = benchRounds
			out.CPUNanosPerCall = (cpuNanos() - cpu) / int64(benchRounds)
			out.WallNanosPerCall = time.Since(wall).Nanoseconds() / int64(benchRounds)
		}
		out.Webhooks = matchWebhooks(ctx, c, attrs, kind)
		w.WriteHeader(http.StatusOK)
	}))
	recorder := httptest.NewRecorder()
	handler.ServeHTTP(recorder, httptest.NewRequest(http.MethodPost, "/", nil))

	out.AuditAnnotations = annotations
	warnings, _ := utilnet.ParseWarningHeaders(recorder.Header().Values("Warning"))
	for _, w := range warnings {
		out.Warnings = append(out.Warnings, w.Text)
	}
	if validateErr == nil {
		out.Allowed = true
		out.Code = http.StatusOK
		return out, nil
	}
	var status *metav1.Status
	if s, ok := validateErr.(apierrors.APIStatus); ok {
		st := s.Status()
		status = &st
	} else {
		status = responsewriters.ErrorToAPIStatus(validateErr)
	}
	out.Code = status.Code
	out.Reason = string(status.Reason)
	out.Message = status.Message
	return out, nil
}

// matchWebhooks: each webhook's matchConditions on the request, as the webhook plugin's
// matcher decides them (rules and selectors are not consulted).
func matchWebhooks(ctx context.Context, c *config, attrs admission.Attributes, kind schema.GroupVersionKind) []webhookOut {
	compiler := plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	versioned := &admission.VersionedAttributes{
		Attributes:         attrs,
		VersionedKind:      kind,
		VersionedObject:    attrs.GetObject(),
		VersionedOldObject: attrs.GetOldObject(),
	}
	var accessors []webhook.WebhookAccessor
	for _, w := range c.validating {
		for i := range w.Webhooks {
			accessors = append(accessors, webhook.NewValidatingWebhookAccessor(fmt.Sprintf("%s/%d", w.Name, i), w.Name, &w.Webhooks[i]))
		}
	}
	for _, w := range c.mutating {
		for i := range w.Webhooks {
			accessors = append(accessors, webhook.NewMutatingWebhookAccessor(fmt.Sprintf("%s/%d", w.Name, i), w.Name, &w.Webhooks[i]))
		}
	}
	var out []webhookOut
	for _, a := range accessors {
		result := a.GetCompiledMatcher(compiler).Match(ctx, versioned, nil, noAuthorizer{})
		o := webhookOut{Name: a.GetName()}
		switch {
		case result.Error != nil:
			o.Match, o.Error = "error", result.Error.Error()
		case result.Matches:
			o.Match = "true"
		default:
			o.Match, o.Condition = "false", result.FailedConditionName
		}
		out = append(out, o)
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// Mode "webhooks": the webhook dispatchers

// runWebhooks runs the case through upstream's MutatingAdmissionWebhook and then its
// ValidatingAdmissionWebhook plugin, chained as kube-apiserver chains them: the plugins built by
// their own constructors (mutating.NewMutatingWebhook, validatingwebhook.NewValidatingAdmissionWebhook:
// the client manager with the default service and authentication resolvers), initialized through
// admission.Plugins.NewFromPlugins (which wraps the chain in the reinvocation handler), over fake
// informers holding the case's webhook configurations and Namespaces; then, as the create and
// update handlers (k8s.io/apiserver/pkg/endpoints/handlers) do, admission.WithAudit(chain).Admit
// on the request's attributes and Validate on new attributes carrying the mutated object
// (k8s.io/apiserver/pkg/registry/rest.AdmissionToValidateObjectFunc), inside the audit context
// (level Request, so the patch annotations are recorded) and the warning recorder. The webhooks
// are called for real: clientConfig.url with its caBundle.
//
// The mutating plugin is built with upstream's JSON Patch library (gopkg.in/evanphx/json-patch.v4),
// where Debian's package imports v5 (tests/oracle/provision.sh puts the import back).
//
// The object stays unstructured through the chain, as a custom resource's does: conversion
// between versions (matchPolicy Equivalent) is the CRD "None" strategy (unstructuredConvertor:
// the same fields, another apiVersion), and nothing is defaulted or pruned.
func runWebhooks(in caseIn, c *config) (caseOut, error) {
	out := caseOut{Upstream: upstreamVersion}
	typed := false
	switch in.Objects {
	case "", "unstructured":
	case "typed":
		typed = true
	default:
		return out, fmt.Errorf("objects %q: the oracle holds them \"typed\" or \"unstructured\"", in.Objects)
	}
	if len(c.policies) > 0 || len(c.bindings) > 0 {
		return out, errors.New("mode webhooks: the configuration holds policies (run them without a mode)")
	}
	attrs, kind, resource, err := attributesHeld(in.Review, typed)
	if err != nil {
		return out, err
	}
	seeded := append([]k8sruntime.Object{}, c.objects...)
	for _, p := range c.mpolicies {
		seeded = append(seeded, p)
	}
	for _, b := range c.mbindings {
		seeded = append(seeded, b)
	}
	for _, w := range c.mutating {
		seeded = append(seeded, w)
	}
	for _, w := range c.validating {
		seeded = append(seeded, w)
	}
	client := fake.NewSimpleClientset(seeded...)
	factory := informers.NewSharedInformerFactory(client, 0)
	stop := make(chan struct{})
	defer close(stop)

	mutatingPlugin, err := mutating.NewMutatingWebhook(nil)
	if err != nil {
		return out, fmt.Errorf("mutating.NewMutatingWebhook: %v", err)
	}
	validatingPlugin, err := validatingwebhook.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return out, fmt.Errorf("validatingwebhook.NewValidatingAdmissionWebhook: %v", err)
	}
	policyPlugin, err := policymutating.NewPlugin(nil)
	if err != nil {
		return out, fmt.Errorf("policymutating.NewPlugin: %v", err)
	}
	plugins := admission.NewPlugins()
	plugins.Register(policymutating.PluginName, func(io.Reader) (admission.Interface, error) { return policyPlugin, nil })
	plugins.Register(mutating.PluginName, func(io.Reader) (admission.Interface, error) { return mutatingPlugin, nil })
	plugins.Register(validatingwebhook.PluginName, func(io.Reader) (admission.Interface, error) { return validatingPlugin, nil })
	schemas, fetched := openAPIClient(in.OpenAPI)
	initialize := admission.PluginInitializers{pluginInitializer{
		client:  withOpenAPI{Clientset: client, openapi: schemas},
		factory: factory,
		stop:    stop,
		mapper:  restMapper(c, kind, resource, attrs.GetNamespace() != ""),
		dynamic: dynamicfake.NewSimpleDynamicClient(clientgoscheme.Scheme),
	}}
	// kube-apiserver's order (pkg/kubeapiserver/options/plugins.go): MutatingAdmissionPolicy,
	// MutatingAdmissionWebhook, then the validating webhooks; one reinvocation round for the
	// chain (NewFromPlugins wraps it in the reinvocation handler).
	names := []string{policymutating.PluginName, mutating.PluginName, validatingwebhook.PluginName}
	chain, err := plugins.NewFromPlugins(names, noPluginConfig{}, initialize, nil)
	if err != nil {
		return out, fmt.Errorf("the admission chain: %v", err)
	}
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	if len(c.mpolicies) > 0 {
		// The type converters' first list of OpenAPI paths, fetched on the plugin's own goroutine.
		select {
		case <-fetched:
			time.Sleep(20 * time.Millisecond)
		case <-time.After(10 * time.Second):
			return out, errors.New("the MutatingAdmissionPolicy plugin never listed the OpenAPI documents")
		}
	}

	objectInterfaces := webhookObjectInterfaces(typed)
	var admitErr error
	var annotations map[string]string
	var final k8sruntime.Object
	handler := filters.WithWarningRecorder(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := audit.WithAuditContext(r.Context())
		ac := audit.AuditContextFrom(ctx)
		_ = ac.Init(audit.RequestAuditConfig{Level: auditinternal.LevelRequest}, nil)
		admit := admission.WithAudit(chain)
		if mutator, ok := admit.(admission.MutationInterface); ok && mutator.Handles(attrs.GetOperation()) {
			admitErr = mutator.Admit(ctx, attrs, objectInterfaces)
		}
		final = attrs.GetObject()
		if admitErr == nil {
			finalAttrs := admission.NewAttributesRecord(attrs.GetObject(), attrs.GetOldObject(), attrs.GetKind(),
				attrs.GetNamespace(), attrs.GetName(), attrs.GetResource(), attrs.GetSubresource(),
				attrs.GetOperation(), attrs.GetOperationOptions(), attrs.IsDryRun(), attrs.GetUserInfo())
			if validator, ok := admit.(admission.ValidationInterface); ok && validator.Handles(finalAttrs.GetOperation()) {
				admitErr = validator.Validate(ctx, finalAttrs, objectInterfaces)
			}
		}
		annotations = ac.GetEventAnnotations()
		w.WriteHeader(http.StatusOK)
	}))
	recorder := httptest.NewRecorder()
	handler.ServeHTTP(recorder, httptest.NewRequest(http.MethodPost, "/", nil))

	out.AuditAnnotations = annotations
	warnings, _ := utilnet.ParseWarningHeaders(recorder.Header().Values("Warning"))
	for _, w := range warnings {
		out.Warnings = append(out.Warnings, w.Text)
	}
	if u, ok := final.(*unstructured.Unstructured); ok && u != nil {
		text, err := json.Marshal(u.Object)
		if err != nil {
			return out, fmt.Errorf("encoding the final object: %v", err)
		}
		out.Object = text
	} else if final != nil && typed {
		// The typed encoding, as kube-apiserver would send the object on.
		text, err := json.Marshal(final)
		if err != nil {
			return out, fmt.Errorf("encoding the final object: %v", err)
		}
		out.Object = text
	}
	if admitErr == nil {
		out.Allowed = true
		out.Code = http.StatusOK
		return out, nil
	}
	var status *metav1.Status
	if s, ok := admitErr.(apierrors.APIStatus); ok {
		st := s.Status()
		status = &st
	} else {
		status = responsewriters.ErrorToAPIStatus(admitErr)
	}
	out.Code = status.Code
	out.Reason = string(status.Reason)
	out.Message = status.Message
	return out, nil
}

// pluginInitializer does for the two webhook plugins what kube-apiserver's initializers do
// (k8s.io/apiserver/pkg/admission/initializer and the webhook initializer): the clientset and
// informers (the Namespace lister and the configuration informers), the authorizer (one that
// cannot decide, as the gateway outside cluster mode) and the drained notification. The service
// and authentication resolvers stay the constructors' defaults: clientConfig.url needs neither.
type pluginInitializer struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	stop    chan struct{}
	mapper  meta.RESTMapper
	dynamic dynamic.Interface
}

func (p pluginInitializer) Initialize(plugin admission.Interface) {
	type webhookPlugin interface {
		SetExternalKubeClientSet(kubernetes.Interface)
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetAuthorizer(authorizer.Authorizer)
		SetDrainedNotification(<-chan struct{})
		SetAPIServerID(string)
	}
	if w, ok := plugin.(webhookPlugin); ok {
		w.SetAPIServerID("oracle")
		w.SetDrainedNotification(p.stop)
		w.SetAuthorizer(noAuthorizer{})
		w.SetExternalKubeClientSet(p.client)
		w.SetExternalKubeInformerFactory(p.factory)
	}
	// The MutatingAdmissionPolicy plugin also takes what the policy plugins take, and is
	// enabled as its GA feature gate enables it.
	type policyPlugin interface {
		SetRESTMapper(meta.RESTMapper)
		SetDynamicClient(dynamic.Interface)
		SetEnabled(bool)
	}
	if w, ok := plugin.(policyPlugin); ok {
		w.SetRESTMapper(p.mapper)
		w.SetDynamicClient(p.dynamic)
		w.SetEnabled(true)
	}
}

// withOpenAPI is the fake clientset with a discovery client that serves OpenAPI v3: the
// MutatingAdmissionPolicy plugin builds each group-version's type converter from the API
// server's /openapi/v3 (patch.NewTypeConverterManager), here from documents on disk.
type withOpenAPI struct {
	*fake.Clientset
	openapi openapi.Client
}

func (c withOpenAPI) Discovery() discovery.DiscoveryInterface {
	return openapiDiscovery{DiscoveryInterface: c.Clientset.Discovery(), client: c.openapi}
}

type openapiDiscovery struct {
	discovery.DiscoveryInterface
	client openapi.Client
}

func (d openapiDiscovery) OpenAPIV3() openapi.Client { return d.client }

// openAPIClient serves the OpenAPI v3 documents of openapiDir (set by
// tests/oracle/provision.sh: k8s.io/client-go's openapi/openapitest/testdata, documents a
// kube-apiserver served for api/v1, apis/apps/v1, apis/batch/v1 and a few more; a file
// `apis__apps__v1_openapi.json` is the path `apis/apps/v1`). Kinds of other group-versions
// have no type converter, as a CRD not yet published: the plugin then answers 503; a case may
// bring documents of its own (`extra`, by path). The channel closes when the plugin first
// lists the paths.
func openAPIClient(extra map[string]json.RawMessage) (openapi.Client, <-chan struct{}) {
	files := openapiFiles{paths: map[string]openapi.GroupVersion{}, listed: make(chan struct{})}
	entries, _ := os.ReadDir(openapiDir)
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), "_openapi.json")
		if name == e.Name() {
			continue
		}
		path := strings.ReplaceAll(name, "__", "/")
		files.paths[path] = openapiFile{file: filepath.Join(openapiDir, e.Name()), url: "/openapi/v3/" + path + "?hash=oracle"}
	}
	for path, document := range extra {
		files.paths[path] = openapiFile{data: document, url: "/openapi/v3/" + path + "?hash=case"}
	}
	return &files, files.listed
}

type openapiFiles struct {
	paths  map[string]openapi.GroupVersion
	listed chan struct{}
	once   sync.Once
}

func (f *openapiFiles) Paths() (map[string]openapi.GroupVersion, error) {
	defer f.once.Do(func() { close(f.listed) })
	return f.paths, nil
}

type openapiFile struct {
	file, url string
	data      []byte
}

func (g openapiFile) Schema(contentType string) ([]byte, error) {
	if contentType != k8sruntime.ContentTypeJSON {
		return nil, fmt.Errorf("the oracle serves OpenAPI as %s only, not %s", k8sruntime.ContentTypeJSON, contentType)
	}
	if g.data != nil {
		return g.data, nil
	}
	return os.ReadFile(g.file)
}

func (g openapiFile) ServerRelativeURL() string { return g.url }

// noPluginConfig: no admission configuration file (the plugins' defaults).
type noPluginConfig struct{}

func (noPluginConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }

// The resources whose versions are equivalent (matchPolicy Equivalent), as kube-apiserver
// registers them: the Deployment's group versions (apps and extensions share one identity, as
// in kube-apiserver's equivalent resource registry). Everything else has only its own version.
// Typed: objects of client-go's kinds created and converted as Go types (typedCreater,
// typedConvertor), the others unstructured.
func webhookObjectInterfaces(typed bool) admission.ObjectInterfaces {
	registry := k8sruntime.NewEquivalentResourceRegistryWithIdentity(func(gr schema.GroupResource) string {
		if gr.Group == "extensions" && gr.Resource == "deployments" {
			return "deployments.apps"
		}
		return ""
	})
	for _, gv := range []schema.GroupVersion{{Group: "apps", Version: "v1"}, {Group: "apps", Version: "v1beta2"}, {Group: "apps", Version: "v1beta1"}, {Group: "extensions", Version: "v1beta1"}} {
		for _, sub := range []string{"", "status", "scale"} {
			kind := gv.WithKind("Deployment")
			if sub == "scale" {
				kind = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
			}
			registry.RegisterKindFor(gv.WithResource("deployments"), sub, kind)
		}
	}
	scheme := clientgoscheme.Scheme
	if typed {
		return &admission.RuntimeObjectInterfaces{
			ObjectCreater:            typedCreater{},
			ObjectTyper:              scheme,
			ObjectDefaulter:          scheme,
			ObjectConvertor:          typedConvertor{},
			EquivalentResourceMapper: registry,
		}
	}
	return &admission.RuntimeObjectInterfaces{
		ObjectCreater:            unstructuredCreater{},
		ObjectTyper:              scheme,
		ObjectDefaulter:          scheme,
		ObjectConvertor:          unstructuredConvertor{},
		EquivalentResourceMapper: registry,
	}
}

// typedCreater makes an object of a kind client-go's scheme knows as its Go type, any other
// unstructured.
type typedCreater struct{}

func (typedCreater) New(kind schema.GroupVersionKind) (k8sruntime.Object, error) {
	if clientgoscheme.Scheme.Recognizes(kind) {
		return clientgoscheme.Scheme.New(kind)
	}
	return unstructuredCreater{}.New(kind)
}

// typedConvertor converts as kube-apiserver's scheme would between the forms the oracle holds:
// unstructured to unstructured as unstructuredConvertor; a Go object into another of its own
// type by copy (kube-apiserver converts between the versioned and the internal type there);
// an unstructured object into the Go type of its kind through client-go's scheme (as
// kube-apiserver's ConvertToVersion turns an ApplyConfiguration's result back into the typed
// object); anything else (two versions of a built-in kind, which client-go cannot convert)
// field by field through the unstructured form, as unstructuredConvertor does.
type typedConvertor struct{}

func (typedConvertor) Convert(in, out, context interface{}) error {
	_, inU := in.(*unstructured.Unstructured)
	outU, outIsU := out.(*unstructured.Unstructured)
	if inU && outIsU {
		return unstructuredConvertor{}.Convert(in, out, context)
	}
	if reflect.TypeOf(in) == reflect.TypeOf(out) {
		copied := in.(k8sruntime.Object).DeepCopyObject()
		reflect.ValueOf(out).Elem().Set(reflect.ValueOf(copied).Elem())
		return nil
	}
	var content map[string]interface{}
	if u, ok := in.(*unstructured.Unstructured); ok {
		content = k8sruntime.DeepCopyJSON(u.Object)
	} else {
		obj, ok := in.(k8sruntime.Object)
		if !ok {
			return fmt.Errorf("the oracle converts objects only, not %T", in)
		}
		var err error
		if content, err = k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return err
		}
	}
	if outIsU {
		kind := outU.GroupVersionKind()
		outU.Object = content
		if !kind.Empty() {
			outU.SetGroupVersionKind(kind)
		}
		return nil
	}
	return k8sruntime.DefaultUnstructuredConverter.FromUnstructured(content, out)
}

func (c typedConvertor) ConvertToVersion(in k8sruntime.Object, target k8sruntime.GroupVersioner) (k8sruntime.Object, error) {
	kind, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{in.GetObjectKind().GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("no target version for %v", in.GetObjectKind().GroupVersionKind())
	}
	if !clientgoscheme.Scheme.Recognizes(kind) {
		return unstructuredConvertor{}.ConvertToVersion(in, target)
	}
	if _, ok := in.(*unstructured.Unstructured); ok && in.GetObjectKind().GroupVersionKind() == kind {
		return clientgoscheme.Scheme.ConvertToVersion(in, target)
	}
	out, err := clientgoscheme.Scheme.New(kind)
	if err != nil {
		return nil, err
	}
	if err := c.Convert(in, out, nil); err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(kind)
	return out, nil
}

func (typedConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// unstructuredCreater makes every object unstructured, as the API server does for a custom
// resource.
type unstructuredCreater struct{}

func (unstructuredCreater) New(kind schema.GroupVersionKind) (k8sruntime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// unstructuredConvertor converts between versions as a CRD without a conversion webhook does
// (strategy None): a deep copy with the target's apiVersion.
type unstructuredConvertor struct{}

func (unstructuredConvertor) Convert(in, out, _ interface{}) error {
	from, ok := in.(*unstructured.Unstructured)
	to, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("the oracle converts unstructured objects only, not %T to %T", in, out)
	}
	kind := to.GroupVersionKind()
	to.Object = k8sruntime.DeepCopyJSON(from.Object)
	if !kind.Empty() {
		to.SetGroupVersionKind(kind)
	}
	return nil
}

func (unstructuredConvertor) ConvertToVersion(in k8sruntime.Object, target k8sruntime.GroupVersioner) (k8sruntime.Object, error) {
	from, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("the oracle converts unstructured objects only, not %T", in)
	}
	kind, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("no target version for %v", from.GroupVersionKind())
	}
	to := &unstructured.Unstructured{Object: k8sruntime.DeepCopyJSON(from.Object)}
	to.SetGroupVersionKind(kind)
	return to, nil
}

func (unstructuredConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}
