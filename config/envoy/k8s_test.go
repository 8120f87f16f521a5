// Structural tests for the Kubernetes resources: envoy-gateway.yaml (Envoy
// Gateway) and istio-envoyfilter.yaml (Istio). Each document is decoded
// strictly into a Go struct that mirrors the fields of its CRD that these
// files use (an unknown or misspelt field fails the test), cross-references
// are resolved (policy → route → gateway, backendRef → Service, grants), and
// every embedded Envoy config is unpacked through protojson into its proto
// and validated with the same checks as the bootstrap files.
package envoy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/goccy/go-yaml"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ------------------------------------------------------------ documents --

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

func (m objectMeta) String() string { return m.Namespace + "/" + m.Name }

// loadDocs splits a multi-document YAML file into JSON documents.
func loadDocs(t testing.TB, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out [][]byte
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: YAML: %v", file, err)
		}
		if doc == nil {
			continue
		}
		j, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, j)
	}
	return out
}

// strictDecode decodes a document the way the Kubernetes API server reads
// it: field names are case-sensitive, and names the struct does not know or
// that appear twice are errors.
func strictDecode(raw []byte, v any) error {
	return jsonv2.Unmarshal(raw, v, jsonv2.RejectUnknownMembers(true))
}

func kindOf(t testing.TB, raw []byte) typeMeta {
	t.Helper()
	var tm typeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		t.Fatal(err)
	}
	return tm
}

var quantity = regexp.MustCompile(`^([0-9]+)(Ki|Mi|Gi|k|M|G)?$`)

// parseQuantity parses the Kubernetes quantities used for buffer limits.
func parseQuantity(s string) (uint64, error) {
	m := quantity.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("quantity %q", s)
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	mult := map[string]uint64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 1e3, "M": 1e6, "G": 1e9}[m[2]]
	return n * mult, err
}

// ------------------------------------------------------- Envoy Gateway ----

const egAnnotation = "gateway.envoyproxy.io/mcpgate-upstream"

// Envoy Gateway's pattern for ext_proc attributes (api/v1alpha1 ext_proc_types.go).
var egAttribute = regexp.MustCompile(`^(connection\.|source\.|destination\.|request\.|response\.|upstream\.|xds\.route_)[a-z_1-9]*$`)

type targetRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

type backendRef struct {
	Group     *string `json:"group,omitempty"`
	Kind      string  `json:"kind,omitempty"`
	Name      string  `json:"name"`
	Namespace string  `json:"namespace,omitempty"`
	Port      int     `json:"port,omitempty"`
}

type httpRoute struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		ParentRefs []struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace,omitempty"`
		} `json:"parentRefs"`
		Rules []struct {
			Matches []struct {
				Path struct {
					Type  string `json:"type"`
					Value string `json:"value"`
				} `json:"path"`
				Headers []struct {
					Type  string `json:"type,omitempty"`
					Name  string `json:"name"`
					Value string `json:"value"`
				} `json:"headers,omitempty"`
			} `json:"matches"`
			Filters []struct {
				Type       string `json:"type"`
				URLRewrite *struct {
					Path struct {
						Type            string `json:"type"`
						ReplaceFullPath string `json:"replaceFullPath"`
					} `json:"path"`
				} `json:"urlRewrite,omitempty"`
				RequestHeaderModifier *struct {
					Remove []string `json:"remove,omitempty"`
				} `json:"requestHeaderModifier,omitempty"`
			} `json:"filters,omitempty"`
			Timeouts *struct {
				Request        string `json:"request,omitempty"`
				BackendRequest string `json:"backendRequest,omitempty"`
			} `json:"timeouts,omitempty"`
			BackendRefs []backendRef `json:"backendRefs,omitempty"`
		} `json:"rules"`
	} `json:"spec"`
}

type connectionSettings struct {
	BufferLimit string `json:"bufferLimit,omitempty"`
}

type circuitBreaker struct {
	MaxConnections           *int64 `json:"maxConnections,omitempty"`
	MaxPendingRequests       *int64 `json:"maxPendingRequests,omitempty"`
	MaxParallelRequests      *int64 `json:"maxParallelRequests,omitempty"`
	MaxParallelRetries       *int64 `json:"maxParallelRetries,omitempty"`
	MaxRequestsPerConnection *int64 `json:"maxRequestsPerConnection,omitempty"`
}

type processingOptions struct {
	Body       string   `json:"body,omitempty"`
	Attributes []string `json:"attributes,omitempty"`
}

type egExtProc struct {
	BackendRefs     []backendRef `json:"backendRefs"`
	BackendSettings *struct {
		Connection     *connectionSettings `json:"connection,omitempty"`
		CircuitBreaker *circuitBreaker     `json:"circuitBreaker,omitempty"`
	} `json:"backendSettings,omitempty"`
	FailOpen       *bool  `json:"failOpen,omitempty"`
	MessageTimeout string `json:"messageTimeout,omitempty"`
	ProcessingMode *struct {
		AllowModeOverride bool               `json:"allowModeOverride,omitempty"`
		Request           *processingOptions `json:"request,omitempty"`
		Response          *processingOptions `json:"response,omitempty"`
	} `json:"processingMode,omitempty"`
	Metadata *struct {
		AccessibleNamespaces []string `json:"accessibleNamespaces,omitempty"`
		WritableNamespaces   []string `json:"writableNamespaces,omitempty"`
	} `json:"metadata,omitempty"`
}

type envoyExtensionPolicy struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		TargetRefs []targetRef  `json:"targetRefs"`
		ExtProc    []*egExtProc `json:"extProc"`
	} `json:"spec"`
}

type service struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Selector map[string]string `json:"selector"`
		Ports    []struct {
			Name        string `json:"name"`
			Port        int    `json:"port"`
			TargetPort  any    `json:"targetPort,omitempty"`
			AppProtocol string `json:"appProtocol,omitempty"`
		} `json:"ports"`
	} `json:"spec"`
}

type referenceGrant struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		From []struct {
			Group     string `json:"group"`
			Kind      string `json:"kind"`
			Namespace string `json:"namespace"`
		} `json:"from"`
		To []struct {
			Group string `json:"group"`
			Kind  string `json:"kind"`
			Name  string `json:"name,omitempty"`
		} `json:"to"`
	} `json:"spec"`
}

type backendTrafficPolicy struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		TargetRefs     []targetRef         `json:"targetRefs"`
		Connection     *connectionSettings `json:"connection,omitempty"`
		CircuitBreaker *circuitBreaker     `json:"circuitBreaker,omitempty"`
		Retry          json.RawMessage     `json:"retry,omitempty"`
	} `json:"spec"`
}

type clientTrafficPolicy struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		TargetRefs []targetRef         `json:"targetRefs"`
		Connection *connectionSettings `json:"connection,omitempty"`
		Timeout    *struct {
			HTTP *struct {
				StreamIdleTimeout      string `json:"streamIdleTimeout,omitempty"`
				RequestReceivedTimeout string `json:"requestReceivedTimeout,omitempty"`
				IdleTimeout            string `json:"idleTimeout,omitempty"`
			} `json:"http,omitempty"`
		} `json:"timeout,omitempty"`
		Path *struct {
			EscapedSlashesAction string `json:"escapedSlashesAction,omitempty"`
			DisableMergeSlashes  bool   `json:"disableMergeSlashes,omitempty"`
		} `json:"path,omitempty"`
	} `json:"spec"`
}

type envoyPatchPolicy struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		TargetRef   targetRef `json:"targetRef"`
		Type        string    `json:"type"`
		JSONPatches []struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Operation struct {
				Op    string          `json:"op"`
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			} `json:"operation"`
		} `json:"jsonPatches"`
	} `json:"spec"`
}

type egConfig struct {
	routes   []*httpRoute
	eeps     []*envoyExtensionPolicy
	services []*service
	grants   []*referenceGrant
	btps     []*backendTrafficPolicy
	ctps     []*clientTrafficPolicy
	epps     []*envoyPatchPolicy
	replies  []*hcmv3.LocalReplyConfig // decoded from the EnvoyPatchPolicy values
}

var egAPIVersions = map[string]string{
	"HTTPRoute":            "gateway.networking.k8s.io/v1",
	"EnvoyExtensionPolicy": "gateway.envoyproxy.io/v1alpha1",
	"Service":              "v1",
	"ReferenceGrant":       "gateway.networking.k8s.io/v1beta1",
	"BackendTrafficPolicy": "gateway.envoyproxy.io/v1alpha1",
	"ClientTrafficPolicy":  "gateway.envoyproxy.io/v1alpha1",
	"EnvoyPatchPolicy":     "gateway.envoyproxy.io/v1alpha1",
}

// loadEG loads the Envoy Gateway documents of files (envoy-gateway.yaml
// when none) as one set of resources.
func loadEG(t testing.TB, files ...string) *egConfig {
	t.Helper()
	c := &egConfig{}
	if len(files) == 0 {
		files = []string{"envoy-gateway.yaml"}
	}
	var docs [][]byte
	for _, f := range files {
		docs = append(docs, loadDocs(t, f)...)
	}
	for i, raw := range docs {
		tm := kindOf(t, raw)
		if want, ok := egAPIVersions[tm.Kind]; !ok || tm.APIVersion != want {
			t.Fatalf("document %d: %s %s: unexpected kind or apiVersion (want %q)", i, tm.APIVersion, tm.Kind, want)
		}
		var v any
		switch tm.Kind {
		case "HTTPRoute":
			r := &httpRoute{}
			c.routes, v = append(c.routes, r), r
		case "EnvoyExtensionPolicy":
			p := &envoyExtensionPolicy{}
			c.eeps, v = append(c.eeps, p), p
		case "Service":
			s := &service{}
			c.services, v = append(c.services, s), s
		case "ReferenceGrant":
			g := &referenceGrant{}
			c.grants, v = append(c.grants, g), g
		case "BackendTrafficPolicy":
			p := &backendTrafficPolicy{}
			c.btps, v = append(c.btps, p), p
		case "ClientTrafficPolicy":
			p := &clientTrafficPolicy{}
			c.ctps, v = append(c.ctps, p), p
		case "EnvoyPatchPolicy":
			p := &envoyPatchPolicy{}
			c.epps, v = append(c.epps, p), p
		}
		if err := strictDecode(raw, v); err != nil {
			t.Fatalf("document %d (%s): %v", i, tm.Kind, err)
		}
	}
	for _, p := range c.epps {
		for _, jp := range p.Spec.JSONPatches {
			if !strings.HasSuffix(jp.Operation.Path, "/local_reply_config") {
				continue
			}
			lrc := &hcmv3.LocalReplyConfig{}
			if err := strictJSON.Unmarshal(jp.Operation.Value, lrc); err != nil {
				t.Fatalf("EnvoyPatchPolicy %s: value into LocalReplyConfig: %v", p.Metadata, err)
			}
			c.replies = append(c.replies, lrc)
		}
	}
	return c
}

func (c *egConfig) route(ns, name string) *httpRoute {
	for _, r := range c.routes {
		if r.Metadata.Namespace == ns && r.Metadata.Name == name {
			return r
		}
	}
	return nil
}

// attachedRoutes resolves an EnvoyExtensionPolicy's targets.
func (c *egConfig) attachedRoutes(p *envoyExtensionPolicy) ([]*httpRoute, error) {
	var out []*httpRoute
	if len(p.Spec.TargetRefs) == 0 {
		return nil, fmt.Errorf("%s: no targetRefs", p.Metadata)
	}
	for _, tr := range p.Spec.TargetRefs {
		if tr.Group != "gateway.networking.k8s.io" || tr.Kind != "HTTPRoute" {
			return nil, fmt.Errorf("%s: targetRef %s/%s: want an HTTPRoute", p.Metadata, tr.Group, tr.Kind)
		}
		r := c.route(p.Metadata.Namespace, tr.Name)
		if r == nil {
			return nil, fmt.Errorf("%s: targetRef HTTPRoute %s/%s is not defined (policy and route share a namespace)", p.Metadata, p.Metadata.Namespace, tr.Name)
		}
		out = append(out, r)
	}
	return out, nil
}

func durationField(what, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", what, s, err)
	}
	return d, nil
}

func eachEEP(fn func(*egConfig, *envoyExtensionPolicy, *egExtProc) error) func(*egConfig) error {
	return func(c *egConfig) error {
		if len(c.eeps) == 0 {
			return errors.New("no EnvoyExtensionPolicy")
		}
		var errs []error
		for _, p := range c.eeps {
			if len(p.Spec.ExtProc) != 1 {
				errs = append(errs, fmt.Errorf("%s: want exactly one extProc, got %d", p.Metadata, len(p.Spec.ExtProc)))
				continue
			}
			if err := fn(c, p, p.Spec.ExtProc[0]); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Metadata, err))
			}
		}
		return errors.Join(errs...)
	}
}

func eachEGRoute(fn func(*egConfig, *httpRoute) error) func(*egConfig) error {
	return func(c *egConfig) error {
		var errs []error
		for _, p := range c.eeps {
			routes, err := c.attachedRoutes(p)
			if err != nil {
				errs = append(errs, err)
			}
			for _, r := range routes {
				if err := fn(c, r); err != nil {
					errs = append(errs, fmt.Errorf("HTTPRoute %s: %w", r.Metadata, err))
				}
			}
		}
		return errors.Join(errs...)
	}
}

// cmpOr returns the first non-empty string.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func targets(refs []targetRef, kind, name string) bool {
	return slices.ContainsFunc(refs, func(r targetRef) bool {
		return r.Group == "gateway.networking.k8s.io" && r.Kind == kind && r.Name == name
	})
}

// routeGateways lists the Gateways (namespace/name) an HTTPRoute attaches to.
func routeGateways(r *httpRoute) []objectMeta {
	var out []objectMeta
	for _, pr := range r.Spec.ParentRefs {
		out = append(out, objectMeta{Name: pr.Name, Namespace: cmpOr(pr.Namespace, r.Metadata.Namespace)})
	}
	return out
}

var egChecks = []check[*egConfig]{
	{"extProc attached to the MCP route", func(c *egConfig) error {
		if len(c.eeps) == 0 {
			return errors.New("no EnvoyExtensionPolicy")
		}
		var errs []error
		for _, p := range c.eeps {
			if _, err := c.attachedRoutes(p); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}},
	{"extProc backend", eachEEP(func(c *egConfig, p *envoyExtensionPolicy, ep *egExtProc) error {
		if len(ep.BackendRefs) != 1 {
			return fmt.Errorf("backendRefs: want one, got %d", len(ep.BackendRefs))
		}
		br := ep.BackendRefs[0]
		ns := cmpOr(br.Namespace, p.Metadata.Namespace)
		if br.Kind != "Service" || (br.Group != nil && *br.Group != "") {
			return fmt.Errorf("backendRef %s: want a core Service", br.Name)
		}
		var port *struct {
			Name        string `json:"name"`
			Port        int    `json:"port"`
			TargetPort  any    `json:"targetPort,omitempty"`
			AppProtocol string `json:"appProtocol,omitempty"`
		}
		for _, s := range c.services {
			if s.Metadata.Namespace != ns || s.Metadata.Name != br.Name {
				continue
			}
			for i := range s.Spec.Ports {
				if s.Spec.Ports[i].Port == br.Port {
					port = &s.Spec.Ports[i]
				}
			}
		}
		if port == nil {
			return fmt.Errorf("backendRef Service %s/%s port %d is not defined", ns, br.Name, br.Port)
		}
		if port.AppProtocol != "kubernetes.io/h2c" && port.AppProtocol != "grpc" {
			return fmt.Errorf("Service %s/%s port %d: appProtocol %q, want kubernetes.io/h2c (gRPC needs HTTP/2)", ns, br.Name, br.Port, port.AppProtocol)
		}
		if ns == p.Metadata.Namespace {
			return nil
		}
		for _, g := range c.grants {
			if g.Metadata.Namespace != ns {
				continue
			}
			from := slices.ContainsFunc(g.Spec.From, func(f struct {
				Group     string `json:"group"`
				Kind      string `json:"kind"`
				Namespace string `json:"namespace"`
			}) bool {
				return f.Group == "gateway.envoyproxy.io" && f.Kind == "EnvoyExtensionPolicy" && f.Namespace == p.Metadata.Namespace
			})
			to := slices.ContainsFunc(g.Spec.To, func(t struct {
				Group string `json:"group"`
				Kind  string `json:"kind"`
				Name  string `json:"name,omitempty"`
			}) bool {
				return t.Group == "" && t.Kind == "Service" && (t.Name == "" || t.Name == br.Name)
			})
			if from && to {
				return nil
			}
		}
		return fmt.Errorf("no ReferenceGrant in %s lets EnvoyExtensionPolicies in %s use Service %s", ns, p.Metadata.Namespace, br.Name)
	})},
	{"fail closed", eachEEP(func(_ *egConfig, _ *envoyExtensionPolicy, ep *egExtProc) error {
		if ep.FailOpen == nil || *ep.FailOpen {
			return errors.New("failOpen must be set to false explicitly: requests must never pass unchecked")
		}
		return nil
	})},
	{"processing modes", eachEEP(func(_ *egConfig, _ *envoyExtensionPolicy, ep *egExtProc) error {
		pm := ep.ProcessingMode
		if pm == nil || pm.Request == nil || pm.Response == nil {
			return errors.New("processingMode.request and .response must both be present (headers are sent only then)")
		}
		var errs []error
		if pm.Request.Body != "Buffered" {
			errs = append(errs, fmt.Errorf("processingMode.request.body %q, want Buffered", pm.Request.Body))
		}
		if pm.Response.Body != "Buffered" {
			errs = append(errs, fmt.Errorf("processingMode.response.body %q, want Buffered", pm.Response.Body))
		}
		return errors.Join(errs...)
	})},
	{"mode override for SSE", eachEEP(func(_ *egConfig, _ *envoyExtensionPolicy, ep *egExtProc) error {
		if ep.ProcessingMode == nil || !ep.ProcessingMode.AllowModeOverride {
			return errors.New("processingMode.allowModeOverride must be true: mcpgate switches SSE responses to Streamed")
		}
		return nil
	})},
	{"message timeout", eachEEP(func(_ *egConfig, _ *envoyExtensionPolicy, ep *egExtProc) error {
		if ep.MessageTimeout == "" {
			return errors.New("messageTimeout is not set (200 ms default is implicit)")
		}
		d, err := durationField("messageTimeout", ep.MessageTimeout)
		if err == nil && (d <= 0 || d > 5*time.Second) {
			err = fmt.Errorf("messageTimeout %v: want between 0 and 5s", d)
		}
		return err
	})},
	{"route metadata attribute", eachEEP(func(_ *egConfig, _ *envoyExtensionPolicy, ep *egExtProc) error {
		var attrs []string
		if ep.ProcessingMode != nil && ep.ProcessingMode.Request != nil {
			attrs = ep.ProcessingMode.Request.Attributes
		}
		if !slices.Contains(attrs, routeAttribute) {
			return fmt.Errorf("processingMode.request.attributes %q lack %s", attrs, routeAttribute)
		}
		for _, a := range attrs {
			if !egAttribute.MatchString(a) {
				return fmt.Errorf("attribute %q is not accepted by Envoy Gateway", a)
			}
		}
		return nil
	})},
	{"mcpgate metadata namespace", eachEEP(func(_ *egConfig, _ *envoyExtensionPolicy, ep *egExtProc) error {
		if ep.Metadata == nil || !slices.Contains(ep.Metadata.WritableNamespaces, routeMetaNS) {
			return errors.New(`metadata.writableNamespaces lacks "mcpgate"`)
		}
		return nil
	})},
	{"route names its upstream", eachEGRoute(func(_ *egConfig, r *httpRoute) error {
		if v := r.Metadata.Annotations[egAnnotation]; !upstreamName.MatchString(v) {
			return fmt.Errorf("annotation %s = %q, want an mcpgate upstream name", egAnnotation, v)
		}
		return nil
	})},
	{"route timeouts", eachEGRoute(func(_ *egConfig, r *httpRoute) error {
		var errs []error
		for i, rule := range r.Spec.Rules {
			if len(rule.BackendRefs) == 0 {
				continue // Envoy Gateway answers itself
			}
			if rule.Timeouts == nil || rule.Timeouts.Request == "" {
				errs = append(errs, fmt.Errorf("rule %d: timeouts.request unset means Envoy's 15 s default; set 0s", i))
				continue
			}
			for what, s := range map[string]string{"request": rule.Timeouts.Request, "backendRequest": rule.Timeouts.BackendRequest} {
				if s == "" {
					continue
				}
				d, err := durationField("timeouts."+what, s)
				if err == nil && d != 0 && d < time.Hour {
					err = fmt.Errorf("timeouts.%s %v cuts tool calls and SSE streams; set 0s", what, d)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("rule %d: %w", i, err))
				}
			}
		}
		return errors.Join(errs...)
	})},
	{"buffer limits", eachEGRoute(func(c *egConfig, r *httpRoute) error {
		var errs []error
		// Client side (the Gateway's listener): bounds every buffered body.
		found := false
		for _, gw := range routeGateways(r) {
			for _, p := range c.ctps {
				if p.Metadata.Namespace != gw.Namespace || !targets(p.Spec.TargetRefs, "Gateway", gw.Name) {
					continue
				}
				found = true
				if p.Spec.Connection == nil {
					errs = append(errs, fmt.Errorf("ClientTrafficPolicy %s: connection.bufferLimit unset", p.Metadata))
					continue
				}
				n, err := parseQuantity(p.Spec.Connection.BufferLimit)
				if err == nil {
					err = checkStreamBuffer("ClientTrafficPolicy "+p.Metadata.String(), wrapperspb.UInt32(uint32(min(n, 1<<32-1))))
				}
				errs = append(errs, err)
			}
		}
		if !found {
			errs = append(errs, errors.New("no ClientTrafficPolicy sets the Gateway's buffer limit (default 32 KiB)"))
		}
		// Toward the MCP server.
		found = false
		for _, p := range c.btps {
			if p.Metadata.Namespace != r.Metadata.Namespace || !targets(p.Spec.TargetRefs, "HTTPRoute", r.Metadata.Name) {
				continue
			}
			found = true
			if p.Spec.Connection == nil {
				errs = append(errs, fmt.Errorf("BackendTrafficPolicy %s: connection.bufferLimit unset", p.Metadata))
				continue
			}
			n, err := parseQuantity(p.Spec.Connection.BufferLimit)
			if err == nil && n < minStreamBuffer {
				err = fmt.Errorf("BackendTrafficPolicy %s: bufferLimit %d < %d", p.Metadata, n, minStreamBuffer)
			}
			errs = append(errs, err)
		}
		if !found {
			errs = append(errs, errors.New("no BackendTrafficPolicy sets the buffer limit toward the MCP server"))
		}
		// Toward mcpgate.
		for _, p := range c.eeps {
			ep := p.Spec.ExtProc[0]
			if ep.BackendSettings == nil || ep.BackendSettings.Connection == nil {
				errs = append(errs, fmt.Errorf("%s: extProc backendSettings.connection.bufferLimit unset", p.Metadata))
				continue
			}
			n, err := parseQuantity(ep.BackendSettings.Connection.BufferLimit)
			if err == nil && n < minStreamBuffer {
				err = fmt.Errorf("%s: extProc bufferLimit %d < %d", p.Metadata, n, minStreamBuffer)
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})},
	{"stream idle timeout", eachEGRoute(func(c *egConfig, r *httpRoute) error {
		for _, gw := range routeGateways(r) {
			for _, p := range c.ctps {
				if p.Metadata.Namespace == gw.Namespace && targets(p.Spec.TargetRefs, "Gateway", gw.Name) &&
					p.Spec.Timeout != nil && p.Spec.Timeout.HTTP != nil && p.Spec.Timeout.HTTP.StreamIdleTimeout != "" {
					d, err := durationField("streamIdleTimeout", p.Spec.Timeout.HTTP.StreamIdleTimeout)
					if err == nil && d <= 0 {
						err = errors.New("streamIdleTimeout must be positive")
					}
					return err
				}
			}
		}
		return errors.New("no ClientTrafficPolicy sets timeout.http.streamIdleTimeout")
	})},
	{"no retries", func(c *egConfig) error {
		for _, p := range c.btps {
			if len(p.Spec.Retry) > 0 {
				return fmt.Errorf("BackendTrafficPolicy %s retries: a tools/call is not idempotent", p.Metadata)
			}
		}
		return nil
	}},
	{"local replies are JSON-RPC", eachEGRoute(func(c *egConfig, r *httpRoute) error {
		for _, gw := range routeGateways(r) {
			for i, p := range c.epps {
				if p.Metadata.Namespace != gw.Namespace || p.Spec.TargetRef.Kind != "Gateway" || p.Spec.TargetRef.Name != gw.Name || p.Spec.Type != "JSONPatch" {
					continue
				}
				for _, jp := range p.Spec.JSONPatches {
					if jp.Type != "type.googleapis.com/envoy.config.listener.v3.Listener" || jp.Operation.Op != "add" ||
						!strings.HasPrefix(jp.Name, gw.Namespace+"/"+gw.Name+"/") {
						return fmt.Errorf("EnvoyPatchPolicy %s: want an add to listener %s/%s/<listener>", p.Metadata, gw.Namespace, gw.Name)
					}
				}
				if i >= len(c.replies) {
					return fmt.Errorf("EnvoyPatchPolicy %s: no local_reply_config value", p.Metadata)
				}
				return checkLocalReplies(c.replies[i])
			}
		}
		return errors.New("no EnvoyPatchPolicy adds local_reply_config to the Gateway's listener")
	})},
	{"documents are named", func(c *egConfig) error {
		var errs []error
		var metas []objectMeta
		for _, r := range c.routes {
			metas = append(metas, r.Metadata)
		}
		for _, p := range c.eeps {
			metas = append(metas, p.Metadata)
		}
		for _, s := range c.services {
			metas = append(metas, s.Metadata)
		}
		for _, g := range c.grants {
			metas = append(metas, g.Metadata)
		}
		for _, p := range c.btps {
			metas = append(metas, p.Metadata)
		}
		for _, p := range c.ctps {
			metas = append(metas, p.Metadata)
		}
		for _, p := range c.epps {
			metas = append(metas, p.Metadata)
		}
		for _, m := range metas {
			if m.Name == "" || m.Namespace == "" {
				errs = append(errs, fmt.Errorf("document %q lacks metadata.name or metadata.namespace", m))
			}
		}
		return errors.Join(errs...)
	}},
}

func TestEnvoyGateway(t *testing.T) {
	runChecks(t, egChecks, loadEG(t))
}

func TestEnvoyGatewayChecksCatchMistakes(t *testing.T) {
	no := false
	yes := true
	cases := []struct {
		name, check string
		mutate      func(c *egConfig)
	}{
		{"fail open", "fail closed", func(c *egConfig) { c.eeps[0].Spec.ExtProc[0].FailOpen = &yes }},
		{"failOpen left to the default", "fail closed", func(c *egConfig) { c.eeps[0].Spec.ExtProc[0].FailOpen = nil }},
		{"streamed request body", "processing modes", func(c *egConfig) { c.eeps[0].Spec.ExtProc[0].ProcessingMode.Request.Body = "Streamed" }},
		{"no response processing", "processing modes", func(c *egConfig) { c.eeps[0].Spec.ExtProc[0].ProcessingMode.Response = nil }},
		{"no mode override", "mode override for SSE", func(c *egConfig) { c.eeps[0].Spec.ExtProc[0].ProcessingMode.AllowModeOverride = no }},
		{"no route metadata", "route metadata attribute", func(c *egConfig) { c.eeps[0].Spec.ExtProc[0].ProcessingMode.Request.Attributes = nil }},
		{"bad message timeout", "message timeout", func(c *egConfig) { c.eeps[0].Spec.ExtProc[0].MessageTimeout = "half a second" }},
		{"no upstream annotation", "route names its upstream", func(c *egConfig) { delete(c.routes[0].Metadata.Annotations, egAnnotation) }},
		{"15s route timeout", "route timeouts", func(c *egConfig) { c.routes[0].Spec.Rules[0].Timeouts.Request = "15s" }},
		{"gateway buffer 1Mi", "buffer limits", func(c *egConfig) { c.ctps[0].Spec.Connection.BufferLimit = "1Mi" }},
		{"gateway buffer 16Mi", "buffer limits", func(c *egConfig) { c.ctps[0].Spec.Connection.BufferLimit = "16Mi" }},
		{"no grant", "extProc backend", func(c *egConfig) { c.grants = nil }},
		{"HTTP/1.1 service port", "extProc backend", func(c *egConfig) { c.services[0].Spec.Ports[0].AppProtocol = "" }},
		{"policy targets another route", "extProc attached to the MCP route", func(c *egConfig) { c.eeps[0].Spec.TargetRefs[0].Name = "other" }},
		{"retries", "no retries", func(c *egConfig) { c.btps[0].Spec.Retry = json.RawMessage(`{"numRetries":2}`) }},
		{"mapper rewrites mcpgate replies", "local replies are JSON-RPC", func(c *egConfig) {
			for _, m := range c.replies[0].Mappers {
				m.Filter = m.GetFilter().GetAndFilter().GetFilters()[0]
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chk := find(egChecks, tc.check)
			c := loadEG(t)
			if err := chk.fn(c); err != nil {
				t.Fatalf("check %q fails before the mutation: %v", tc.check, err)
			}
			tc.mutate(c)
			if err := chk.fn(c); err == nil {
				t.Fatalf("check %q passed after %q", tc.check, tc.name)
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
}

// ---------------------------------------------------------------- Istio ----

type envoyFilter struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		WorkloadSelector *struct {
			Labels map[string]string `json:"labels"`
		} `json:"workloadSelector,omitempty"`
		ConfigPatches []*configPatch `json:"configPatches"`
		Priority      *int           `json:"priority,omitempty"`
	} `json:"spec"`
}

type configPatch struct {
	ApplyTo string `json:"applyTo"`
	Match   *struct {
		Context string `json:"context,omitempty"`
		Proxy   *struct {
			ProxyVersion string            `json:"proxyVersion,omitempty"`
			Metadata     map[string]string `json:"metadata,omitempty"`
		} `json:"proxy,omitempty"`
		Listener *struct {
			PortNumber  int    `json:"portNumber,omitempty"`
			Name        string `json:"name,omitempty"`
			FilterChain *struct {
				Name   string `json:"name,omitempty"`
				Filter *struct {
					Name      string `json:"name,omitempty"`
					SubFilter *struct {
						Name string `json:"name"`
					} `json:"subFilter,omitempty"`
				} `json:"filter,omitempty"`
			} `json:"filterChain,omitempty"`
		} `json:"listener,omitempty"`
		RouteConfiguration *struct {
			PortNumber int    `json:"portNumber,omitempty"`
			PortName   string `json:"portName,omitempty"`
			Name       string `json:"name,omitempty"`
			Vhost      *struct {
				Name  string `json:"name,omitempty"`
				Route *struct {
					Name   string `json:"name,omitempty"`
					Action string `json:"action,omitempty"`
				} `json:"route,omitempty"`
			} `json:"vhost,omitempty"`
		} `json:"routeConfiguration,omitempty"`
		Cluster *struct {
			PortNumber int    `json:"portNumber,omitempty"`
			Service    string `json:"service,omitempty"`
			Subset     string `json:"subset,omitempty"`
			Name       string `json:"name,omitempty"`
		} `json:"cluster,omitempty"`
	} `json:"match,omitempty"`
	Patch struct {
		Operation   string          `json:"operation"`
		Value       json.RawMessage `json:"value,omitempty"`
		FilterClass string          `json:"filterClass,omitempty"`
	} `json:"patch"`
	value proto.Message // decoded Value
}

var (
	istioApplyTo    = []string{"LISTENER", "FILTER_CHAIN", "NETWORK_FILTER", "HTTP_FILTER", "ROUTE_CONFIGURATION", "VIRTUAL_HOST", "HTTP_ROUTE", "CLUSTER", "EXTENSION_CONFIG", "BOOTSTRAP", "LISTENER_FILTER"}
	istioContext    = []string{"ANY", "SIDECAR_INBOUND", "SIDECAR_OUTBOUND", "GATEWAY"}
	istioOperation  = []string{"MERGE", "ADD", "REMOVE", "INSERT_BEFORE", "INSERT_AFTER", "INSERT_FIRST", "REPLACE"}
	outboundCluster = regexp.MustCompile(`^outbound\|([0-9]+)\|[^|]*\|([a-z0-9.-]+)$`)
)

// istioConfig is the EnvoyFilter with its patch values decoded.
type istioConfig struct {
	ef       *envoyFilter
	filter   *configPatch // HTTP_FILTER
	extProc  *extprocfilterv3.ExternalProcessor
	route    *configPatch // HTTP_ROUTE
	hcmPatch *configPatch // NETWORK_FILTER
	hcm      *hcmv3.HttpConnectionManager
}

func (c *istioConfig) patches(applyTo string) []*configPatch {
	var out []*configPatch
	for _, p := range c.ef.Spec.ConfigPatches {
		if p.ApplyTo == applyTo {
			out = append(out, p)
		}
	}
	return out
}

func loadIstio(t testing.TB) *istioConfig {
	t.Helper()
	docs := loadDocs(t, "istio-envoyfilter.yaml")
	if len(docs) != 1 {
		t.Fatalf("want one document, got %d", len(docs))
	}
	return decodeEnvoyFilter(t, docs[0])
}

// decodeEnvoyFilter decodes an EnvoyFilter document strictly, and each
// patch value into its Envoy proto.
func decodeEnvoyFilter(t testing.TB, raw []byte) *istioConfig {
	t.Helper()
	c := &istioConfig{ef: &envoyFilter{}}
	if err := strictDecode(raw, c.ef); err != nil {
		t.Fatal(err)
	}
	for i, p := range c.ef.Spec.ConfigPatches {
		var m proto.Message
		switch p.ApplyTo {
		case "HTTP_FILTER":
			m = &hcmv3.HttpFilter{}
		case "HTTP_ROUTE":
			m = &routev3.Route{}
		case "NETWORK_FILTER":
			m = &listenerv3.Filter{}
		case "LISTENER":
			m = &listenerv3.Listener{}
		case "CLUSTER":
			m = &clusterv3.Cluster{}
		default:
			t.Fatalf("configPatches[%d]: applyTo %s is not modelled by this test", i, p.ApplyTo)
		}
		if err := strictJSON.Unmarshal(p.Patch.Value, m); err != nil {
			t.Fatalf("configPatches[%d] (%s): value: %v", i, p.ApplyTo, err)
		}
		p.value = m
		switch v := m.(type) {
		case *hcmv3.HttpFilter:
			c.filter = p
			if v.GetName() == extProcFilter {
				c.extProc = &extprocfilterv3.ExternalProcessor{}
				if err := v.GetTypedConfig().UnmarshalTo(c.extProc); err != nil {
					t.Fatalf("configPatches[%d]: typed_config into ExternalProcessor: %v", i, err)
				}
			}
		case *routev3.Route:
			c.route = p
		case *listenerv3.Filter:
			c.hcmPatch = p
			c.hcm = &hcmv3.HttpConnectionManager{}
			if err := v.GetTypedConfig().UnmarshalTo(c.hcm); err != nil {
				t.Fatalf("configPatches[%d]: typed_config into HttpConnectionManager: %v", i, err)
			}
		}
	}
	return c
}

func inboundPort(p *configPatch) int {
	switch m := p.Match; {
	case m == nil:
		return 0
	case m.Listener != nil:
		return m.Listener.PortNumber
	case m.RouteConfiguration != nil:
		return m.RouteConfiguration.PortNumber
	case m.Cluster != nil:
		return m.Cluster.PortNumber
	}
	return 0
}

var istioChecks = func() []check[*istioConfig] {
	cs := []check[*istioConfig]{
		{"EnvoyFilter shape", func(c *istioConfig) error {
			ef := c.ef
			var errs []error
			if ef.APIVersion != "networking.istio.io/v1alpha3" || ef.Kind != "EnvoyFilter" {
				errs = append(errs, fmt.Errorf("%s %s, want networking.istio.io/v1alpha3 EnvoyFilter", ef.APIVersion, ef.Kind))
			}
			if ef.Metadata.Name == "" || ef.Metadata.Namespace == "" {
				errs = append(errs, errors.New("metadata.name and metadata.namespace are required"))
			}
			if ef.Spec.WorkloadSelector == nil || len(ef.Spec.WorkloadSelector.Labels) == 0 {
				errs = append(errs, errors.New("workloadSelector.labels: without it the filter applies to every workload in the namespace"))
			}
			if len(ef.Spec.ConfigPatches) == 0 {
				errs = append(errs, errors.New("no configPatches"))
			}
			for i, p := range ef.Spec.ConfigPatches {
				if !slices.Contains(istioApplyTo, p.ApplyTo) {
					errs = append(errs, fmt.Errorf("configPatches[%d].applyTo %q", i, p.ApplyTo))
				}
				if p.Match == nil || !slices.Contains(istioContext, p.Match.Context) {
					errs = append(errs, fmt.Errorf("configPatches[%d].match.context must be set", i))
				}
				if !slices.Contains(istioOperation, p.Patch.Operation) {
					errs = append(errs, fmt.Errorf("configPatches[%d].patch.operation %q", i, p.Patch.Operation))
				}
				if p.Patch.Operation != "REMOVE" && len(p.Patch.Value) == 0 {
					errs = append(errs, fmt.Errorf("configPatches[%d]: patch.value is required", i))
				}
			}
			return errors.Join(errs...)
		}},
		{"embedded Envoy config is valid", func(c *istioConfig) error {
			var errs []error
			for i, p := range c.ef.Spec.ConfigPatches {
				path := fmt.Sprintf("configPatches[%d].value", i)
				if p.Patch.Operation == "MERGE" {
					// MERGE values are partial messages, and so is a typed_config
					// merged into an existing filter: validate what they pack.
					v := p.value
					if f, ok := v.(*listenerv3.Filter); ok {
						inner, err := f.GetTypedConfig().UnmarshalNew()
						if err != nil {
							errs = append(errs, fmt.Errorf("%s: %w", path, err))
							continue
						}
						v, path = inner, path+".typed_config"
					}
					errs = append(errs, validateAnys(v, path))
				} else {
					errs = append(errs, validateDeep(p.value, path))
				}
				if d := deprecatedUses(p.value); len(d) > 0 {
					errs = append(errs, fmt.Errorf("%s: deprecated: %v", path, d))
				}
			}
			return errors.Join(errs...)
		}},
		{"ext_proc inserted before the router", func(c *istioConfig) error {
			if len(c.patches("HTTP_FILTER")) != 1 || c.extProc == nil {
				return errors.New("want exactly one HTTP_FILTER patch, inserting envoy.filters.http.ext_proc")
			}
			p := c.filter
			l := p.Match.Listener
			if p.Match.Context != "SIDECAR_INBOUND" || p.Patch.Operation != "INSERT_BEFORE" || l == nil || l.FilterChain == nil ||
				l.FilterChain.Filter == nil || l.FilterChain.Filter.Name != "envoy.filters.network.http_connection_manager" ||
				l.FilterChain.Filter.SubFilter == nil || l.FilterChain.Filter.SubFilter.Name != routerFilter {
				return errors.New("the ext_proc patch must be SIDECAR_INBOUND, INSERT_BEFORE the router in the HTTP connection manager")
			}
			return nil
		}},
		{"ext_proc cluster is Istio's outbound cluster", func(c *istioConfig) error {
			name := c.extProc.GetGrpcService().GetEnvoyGrpc().GetClusterName()
			m := outboundCluster.FindStringSubmatch(name)
			if m == nil {
				return fmt.Errorf("cluster_name %q: want outbound|<port>||<service FQDN> (Istio's cluster, with mesh mTLS)", name)
			}
			for _, p := range c.patches("CLUSTER") {
				if cl := p.Match.Cluster; p.Match.Context == "SIDECAR_OUTBOUND" && cl != nil && cl.Service == m[2] && strconv.Itoa(cl.PortNumber) == m[1] {
					return nil
				}
			}
			return fmt.Errorf("no SIDECAR_OUTBOUND CLUSTER patch for %s port %s (buffer limit toward mcpgate)", m[2], m[1])
		}},
		{"route patch", func(c *istioConfig) error {
			if len(c.patches("HTTP_ROUTE")) != 1 || c.route == nil {
				return errors.New("want exactly one HTTP_ROUTE patch")
			}
			if c.route.Match.Context != "SIDECAR_INBOUND" || c.route.Patch.Operation != "MERGE" {
				return errors.New("the route patch must MERGE into SIDECAR_INBOUND routes")
			}
			r := c.route.value.(*routev3.Route)
			return errors.Join(checkRouteUpstream(r), checkRouteTimeouts(r))
		}},
		{"HCM patch", func(c *istioConfig) error {
			if c.hcm == nil || c.hcmPatch.Match.Context != "SIDECAR_INBOUND" || c.hcmPatch.Patch.Operation != "MERGE" {
				return errors.New("want a NETWORK_FILTER MERGE of the inbound HTTP connection manager")
			}
			var errs []error
			if d := c.hcm.GetStreamIdleTimeout(); d == nil || dur(d) <= 0 {
				errs = append(errs, errors.New("stream_idle_timeout must be set and positive"))
			}
			errs = append(errs, checkLocalReplies(c.hcm.GetLocalReplyConfig()))
			return errors.Join(errs...)
		}},
		{"buffer limits", func(c *istioConfig) error {
			var errs []error
			listeners := c.patches("LISTENER")
			if len(listeners) == 0 {
				errs = append(errs, errors.New("no LISTENER patch: Istio's default buffer limit is below mcpgate's body limit"))
			}
			for _, p := range listeners {
				errs = append(errs, checkStreamBuffer("inbound listener", p.value.(*listenerv3.Listener).GetPerConnectionBufferLimitBytes()))
			}
			inbound := false
			for _, p := range c.patches("CLUSTER") {
				inbound = inbound || p.Match.Context == "SIDECAR_INBOUND"
				errs = append(errs, checkClusterBuffer("cluster patch", p.value.(*clusterv3.Cluster).GetPerConnectionBufferLimitBytes()))
			}
			if !inbound {
				errs = append(errs, errors.New("no SIDECAR_INBOUND CLUSTER patch (buffer limit toward the MCP server)"))
			}
			return errors.Join(errs...)
		}},
		{"one inbound port", func(c *istioConfig) error {
			ports := map[int]bool{}
			for _, p := range c.ef.Spec.ConfigPatches {
				if p.Match != nil && p.Match.Context == "SIDECAR_INBOUND" {
					ports[inboundPort(p)] = true
				}
			}
			if len(ports) != 1 || ports[0] {
				return fmt.Errorf("inbound patches must all name the MCP server's port, got %v", ports)
			}
			return nil
		}},
	}
	for _, ec := range extProcChecks {
		cs = append(cs, check[*istioConfig]{"ext_proc: " + ec.name, func(c *istioConfig) error {
			if c.extProc == nil {
				return errors.New("no ext_proc filter")
			}
			return ec.fn(c.extProc)
		}})
	}
	// The sidecar fronts one MCP server: mcpgate never re-routes there.
	cs = append(cs, check[*istioConfig]{"route cache action", func(c *istioConfig) error {
		return checkRouteCacheAction(c.extProc, false)
	}})
	return cs
}()

func TestIstioEnvoyFilter(t *testing.T) {
	runChecks(t, istioChecks, loadIstio(t))
}

func TestIstioChecksCatchMistakes(t *testing.T) {
	cases := []struct {
		name, check string
		mutate      func(c *istioConfig)
	}{
		{"fail open", "ext_proc: fail closed", func(c *istioConfig) { c.extProc.FailureModeAllow = true }},
		{"no mode override", "ext_proc: mode override for SSE", func(c *istioConfig) { c.extProc.AllowModeOverride = false }},
		{"route cache cleared", "route cache action", func(c *istioConfig) {
			c.extProc.RouteCacheAction = extprocfilterv3.ExternalProcessor_DEFAULT
		}},
		{"bootstrap cluster name", "ext_proc cluster is Istio's outbound cluster", func(c *istioConfig) {
			c.extProc.GrpcService.GetEnvoyGrpc().ClusterName = "mcpgate_extproc"
		}},
		{"route timeout 15s", "route patch", func(c *istioConfig) {
			c.route.value.(*routev3.Route).GetRoute().Timeout = durationpb.New(15 * time.Second)
		}},
		{"route without upstream", "route patch", func(c *istioConfig) { c.route.value.(*routev3.Route).Metadata = nil }},
		{"listener buffer 1 MiB", "buffer limits", func(c *istioConfig) {
			c.patches("LISTENER")[0].value.(*listenerv3.Listener).PerConnectionBufferLimitBytes = wrapperspb.UInt32(1 << 20)
		}},
		{"no local replies", "HCM patch", func(c *istioConfig) { c.hcm.LocalReplyConfig = nil }},
		{"inserted after the router", "ext_proc inserted before the router", func(c *istioConfig) { c.filter.Patch.Operation = "INSERT_AFTER" }},
		{"no workload selector", "EnvoyFilter shape", func(c *istioConfig) { c.ef.Spec.WorkloadSelector = nil }},
		{"patch for another port", "one inbound port", func(c *istioConfig) { c.route.Match.RouteConfiguration.PortNumber = 9090 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chk := find(istioChecks, tc.check)
			c := loadIstio(t)
			if err := chk.fn(c); err != nil {
				t.Fatalf("check %q fails before the mutation: %v", tc.check, err)
			}
			tc.mutate(c)
			if err := chk.fn(c); err == nil {
				t.Fatalf("check %q passed after %q", tc.check, tc.name)
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
}

// A misspelt field must fail loading, in the bootstrap (protojson) and in
// the Kubernetes resources (strict struct decoding), rather than being
// ignored as Kubernetes or a lenient YAML reader would.
func TestTyposAreRejected(t *testing.T) {
	j := strings.Replace(string(yamlToJSON(t, "sidecar.yaml")), `"allow_mode_override"`, `"allow_mode_overide"`, 1)
	if err := strictJSON.Unmarshal([]byte(j), &bootstrapv3.Bootstrap{}); err == nil {
		t.Error("bootstrap: a misspelt ext_proc field was accepted")
	}
	for _, raw := range loadDocs(t, "envoy-gateway.yaml") {
		if kindOf(t, raw).Kind != "EnvoyExtensionPolicy" {
			continue
		}
		bad := strings.Replace(string(raw), `"allowModeOverride"`, `"allowModeOveride"`, 1)
		if err := strictDecode([]byte(bad), &envoyExtensionPolicy{}); err == nil {
			t.Error("EnvoyExtensionPolicy: a misspelt field was accepted")
		}
	}
	raw := loadDocs(t, "istio-envoyfilter.yaml")[0]
	bad := strings.Replace(string(raw), `"subFilter"`, `"subfilter"`, 1) // case matters
	if err := strictDecode([]byte(bad), &envoyFilter{}); err == nil {
		t.Error("EnvoyFilter: a misspelt field was accepted")
	}
}
