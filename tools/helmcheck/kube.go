package helmcheck

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Doc is one rendered manifest.
type Doc struct {
	Source string // template path, from the "# Source:" line
	Raw    []byte // the YAML document
	GVK    schema.GroupVersionKind
	Meta   metav1.ObjectMeta
	Obj    any // typed object: a k8s.io/api type or a CRD mirror below
}

func (d *Doc) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", d.GVK.Kind, d.Meta.Namespace, d.Meta.Name, d.Source)
}

// strictSerializer decodes YAML into the types client-go registers, with
// Kubernetes' strict decoding: an unknown field or a duplicate key is an
// error (what the API server's fieldValidation=Strict reports).
var strictSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// crdMirrors are the custom resources the chart may render, each decoded
// strictly (sigs.k8s.io/yaml.UnmarshalStrict) into a struct holding the
// CRD's fields that the chart uses. A field the chart sets that is not here
// is an error: add it only after checking the CRD's schema.
var crdMirrors = map[schema.GroupVersionKind]func() any{
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}:             func() any { return &ServiceMonitor{} },
	{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Kind: "EnvoyExtensionPolicy"}: func() any { return &EnvoyExtensionPolicy{} },
	{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Kind: "BackendTrafficPolicy"}: func() any { return &BackendTrafficPolicy{} },
	{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Kind: "ClientTrafficPolicy"}:  func() any { return &ClientTrafficPolicy{} },
	{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Kind: "EnvoyPatchPolicy"}:     func() any { return &EnvoyPatchPolicy{} },
	{Group: "gateway.networking.k8s.io", Version: "v1beta1", Kind: "ReferenceGrant"}:    func() any { return &ReferenceGrant{} },
	{Group: "networking.istio.io", Version: "v1alpha3", Kind: "EnvoyFilter"}:            func() any { return &EnvoyFilter{} },
}

// Parse splits a rendered release into documents and decodes each strictly.
func Parse(manifest string) ([]*Doc, error) {
	var docs []*Doc
	var errs []error
	for _, part := range strings.Split(manifest, "\n---\n") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "---\n")
		if part == "" {
			continue
		}
		d := &Doc{Raw: []byte(part)}
		if first, _, ok := strings.Cut(part, "\n"); ok && strings.HasPrefix(first, "# Source: ") {
			d.Source = strings.TrimPrefix(first, "# Source: ")
		}
		if err := d.decode(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Source, err))
			continue
		}
		docs = append(docs, d)
	}
	return docs, errors.Join(errs...)
}

func (d *Doc) decode() error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(d.Raw, &tm); err != nil {
		return fmt.Errorf("YAML: %w", err)
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return errors.New("apiVersion and kind are required")
	}
	d.GVK = schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if scheme.Scheme.Recognizes(d.GVK) {
		obj, _, err := strictSerializer.Decode(d.Raw, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", d.GVK.Kind, err)
		}
		d.Obj = obj
		acc, ok := obj.(metav1.Object)
		if !ok {
			return fmt.Errorf("%s has no object metadata", d.GVK)
		}
		d.Meta = metav1.ObjectMeta{Name: acc.GetName(), Namespace: acc.GetNamespace(), Labels: acc.GetLabels(), Annotations: acc.GetAnnotations()}
		return nil
	}
	mk, ok := crdMirrors[d.GVK]
	if !ok {
		return fmt.Errorf("%s: neither a Kubernetes type nor a custom resource this check knows", d.GVK)
	}
	v := mk()
	if err := yaml.UnmarshalStrict(d.Raw, v); err != nil {
		return fmt.Errorf("%s: %w", d.GVK.Kind, err)
	}
	d.Obj = v
	d.Meta = v.(interface{ meta() metav1.ObjectMeta }).meta()
	if c, ok := v.(interface{ check() error }); ok {
		if err := c.check(); err != nil {
			return fmt.Errorf("%s %s: %w", d.GVK.Kind, d.Meta.Name, err)
		}
	}
	return nil
}

// ---------------------------------------------------------------- checks --

// Check applies what the API server would refuse and what a working
// release needs: valid names and labels, namespaced objects with a
// namespace, no object twice, and every reference inside the release
// resolved (selectors, named ports, volumes, ConfigMaps, the HPA's and
// policies' targets). external lists ConfigMaps and Secrets the release
// uses but does not create (the *existing* values).
func Check(docs []*Doc, external []string) error {
	var errs []error
	add := func(d *Doc, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", d, fmt.Sprintf(format, a...)))
	}
	seen := map[string]bool{}
	configMaps := map[string]bool{}
	for _, d := range docs {
		key := d.GVK.String() + " " + d.Meta.Namespace + "/" + d.Meta.Name
		if seen[key] {
			add(d, "rendered twice")
		}
		seen[key] = true
		for _, msg := range validation.IsDNS1123Subdomain(d.Meta.Name) {
			add(d, "metadata.name: %s", msg)
		}
		if d.Meta.Namespace == "" {
			add(d, "metadata.namespace is empty (every object the chart renders is namespaced)")
		}
		for k, v := range d.Meta.Labels {
			for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
				add(d, "label %s=%s: %s", k, v, msg)
			}
		}
		if _, ok := d.Obj.(*corev1.ConfigMap); ok {
			configMaps[d.Meta.Name] = true
		}
	}
	deps := objs[*appsv1.Deployment](docs)
	if len(deps) != 1 {
		return errors.Join(append(errs, fmt.Errorf("want exactly one Deployment, got %d", len(deps)))...)
	}
	dep := deps[0]
	errs = append(errs, checkDeployment(dep, configMaps, external))
	podLabels := labels.Set(dep.Spec.Template.Labels)
	ports := map[string]bool{}
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
	}
	var svcPorts []string
	for _, s := range objs[*corev1.Service](docs) {
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) || len(s.Spec.Selector) == 0 {
			errs = append(errs, fmt.Errorf("Service %s: selector %v does not select the Deployment's pods", s.Name, s.Spec.Selector))
		}
		for _, p := range s.Spec.Ports {
			svcPorts = append(svcPorts, p.Name)
			if p.TargetPort.Type == intstr.String && !ports[p.TargetPort.StrVal] {
				errs = append(errs, fmt.Errorf("Service %s port %s: targetPort %q is no container port", s.Name, p.Name, p.TargetPort.StrVal))
			}
		}
	}
	for _, p := range objs[*policyv1.PodDisruptionBudget](docs) {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || !sel.Matches(podLabels) {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: selector does not select the Deployment's pods", p.Name))
		}
		if p.Spec.MinAvailable != nil && p.Spec.MinAvailable.Type == intstr.Int && dep.Spec.Replicas != nil && p.Spec.MinAvailable.IntVal >= *dep.Spec.Replicas {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: minAvailable %d with %d replicas blocks every voluntary eviction", p.Name, p.Spec.MinAvailable.IntVal, *dep.Spec.Replicas))
		}
	}
	for _, h := range objs[*autoscalingv2.HorizontalPodAutoscaler](docs) {
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != dep.Name || h.Spec.ScaleTargetRef.APIVersion != "apps/v1" {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: scaleTargetRef is not the Deployment", h.Name))
		}
		if dep.Spec.Replicas != nil {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: the Deployment sets replicas too (each upgrade would reset the HPA's count)", h.Name))
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: want 1 <= minReplicas <= maxReplicas", h.Name))
		}
		if len(h.Spec.Metrics) == 0 {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: no metrics", h.Name))
		}
	}
	for _, sm := range objs[*ServiceMonitor](docs) {
		for _, e := range sm.Spec.Endpoints {
			if !slices.Contains(svcPorts, e.Port) {
				errs = append(errs, fmt.Errorf("ServiceMonitor %s: endpoint port %q is no Service port %v", sm.Metadata.Name, e.Port, svcPorts))
			}
		}
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		matched := false
		for _, s := range objs[*corev1.Service](docs) {
			matched = matched || (err == nil && sel.Matches(labels.Set(s.Labels)))
		}
		if !matched {
			errs = append(errs, fmt.Errorf("ServiceMonitor %s: selector matches no Service of the release", sm.Metadata.Name))
		}
	}
	return errors.Join(errs...)
}

func checkDeployment(d *appsv1.Deployment, configMaps map[string]bool, external []string) error {
	var errs []error
	add := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("Deployment %s: %s", d.Name, fmt.Sprintf(format, a...)))
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		add("spec.selector does not select the pod template's labels")
	}
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		add("pod securityContext.runAsNonRoot must be true")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		add("automountServiceAccountToken must be false (mcpgate does not use the Kubernetes API)")
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
		if cm := v.ConfigMap; cm != nil && !configMaps[cm.Name] && !slices.Contains(external, cm.Name) {
			add("volume %s: ConfigMap %q is neither rendered nor named in values", v.Name, cm.Name)
		}
		if s := v.Secret; s != nil && !slices.Contains(external, s.SecretName) {
			add("volume %s: Secret %q is not named in values", v.Name, s.SecretName)
		}
	}
	all := append(slices.Clone(pod.InitContainers), pod.Containers...)
	var mcpgate *corev1.Container
	for i, c := range all {
		if c.Name == "mcpgate" {
			mcpgate = &all[i]
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			add("container %s: securityContext.readOnlyRootFilesystem must be true", c.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			add("container %s: securityContext.allowPrivilegeEscalation must be false", c.Name)
		}
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			add("container %s: capabilities must drop ALL", c.Name)
		}
		for _, m := range c.VolumeMounts {
			if _, ok := vols[m.Name]; !ok {
				add("container %s mounts volume %q, which the pod lacks", c.Name, m.Name)
			}
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
			for _, msg := range validation.IsValidPortName(p.Name) {
				add("container %s port %s: %s", c.Name, p.Name, msg)
			}
		}
		for what, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if p == nil {
				continue
			}
			var port intstr.IntOrString
			switch {
			case p.HTTPGet != nil:
				port = p.HTTPGet.Port
			case p.TCPSocket != nil:
				port = p.TCPSocket.Port
			}
			if port.Type == intstr.String && !ports[port.StrVal] {
				add("container %s: %s probe port %q is not one of its ports", c.Name, what, port.StrVal)
			}
		}
	}
	if mcpgate == nil {
		add("no container named mcpgate")
		return errors.Join(errs...)
	}
	if mcpgate.LivenessProbe == nil || mcpgate.LivenessProbe.HTTPGet == nil || mcpgate.LivenessProbe.HTTPGet.Path != "/healthz" ||
		mcpgate.ReadinessProbe == nil || mcpgate.ReadinessProbe.HTTPGet == nil || mcpgate.ReadinessProbe.HTTPGet.Path != "/readyz" {
		add("mcpgate: liveness must GET /healthz and readiness /readyz (admin listener)")
	}
	if len(mcpgate.Args) < 3 || mcpgate.Args[0] != "serve" || mcpgate.Args[1] != "--config" {
		add("mcpgate: args %v, want serve --config FILE", mcpgate.Args)
	}
	if mcpgate.Resources.Requests.Cpu().IsZero() || mcpgate.Resources.Limits.Memory().IsZero() {
		add("mcpgate: set a CPU request and a memory limit")
	}
	return errors.Join(errs...)
}

// objs returns the decoded objects of type T.
func objs[T any](docs []*Doc) []T {
	var out []T
	for _, d := range docs {
		if v, ok := d.Obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// Find returns the documents of a kind.
func Find(docs []*Doc, kind string) []*Doc {
	var out []*Doc
	for _, d := range docs {
		if d.GVK.Kind == kind {
			out = append(out, d)
		}
	}
	return out
}

var _ runtime.Object = (*appsv1.Deployment)(nil)

// ------------------------------------------------------------ CRD mirrors --
//
// Field names and types follow the CRDs' OpenAPI schemas: Prometheus
// Operator's monitoring.coreos.com_servicemonitors, Envoy Gateway's
// gateway.envoyproxy.io_* (v1alpha1), Gateway API's ReferenceGrant
// (v1beta1) and Istio's EnvoyFilter (networking.istio.io/v1alpha3).

type crdBase struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
}

func (c *crdBase) meta() metav1.ObjectMeta { return c.Metadata }

// promDuration is the pattern of monitoring.coreos.com Duration fields.
var promDuration = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)

// ServiceMonitor mirrors monitoring.coreos.com/v1 ServiceMonitor.
type ServiceMonitor struct {
	crdBase
	Spec struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func (s *ServiceMonitor) check() error {
	var errs []error
	if len(s.Spec.Endpoints) == 0 {
		errs = append(errs, errors.New("spec.endpoints is empty"))
	}
	for i, e := range s.Spec.Endpoints {
		if e.Port == "" {
			errs = append(errs, fmt.Errorf("endpoints[%d].port is required", i))
		}
		if !strings.HasPrefix(e.Path, "/") {
			errs = append(errs, fmt.Errorf("endpoints[%d].path %q", i, e.Path))
		}
		for what, v := range map[string]string{"interval": e.Interval, "scrapeTimeout": e.ScrapeTimeout} {
			if v != "" && !promDuration.MatchString(v) {
				errs = append(errs, fmt.Errorf("endpoints[%d].%s %q is not a Prometheus duration", i, what, v))
			}
		}
	}
	return errors.Join(errs...)
}

type gwTargetRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// EnvoyExtensionPolicy mirrors gateway.envoyproxy.io/v1alpha1.
type EnvoyExtensionPolicy struct {
	crdBase
	Spec struct {
		TargetRefs []gwTargetRef `json:"targetRefs"`
		ExtProc    []struct {
			BackendRefs []struct {
				Group     *string `json:"group,omitempty"`
				Kind      string  `json:"kind,omitempty"`
				Name      string  `json:"name"`
				Namespace string  `json:"namespace,omitempty"`
				Port      int32   `json:"port,omitempty"`
			} `json:"backendRefs"`
			BackendSettings *struct {
				Connection *struct {
					BufferLimit string `json:"bufferLimit,omitempty"`
				} `json:"connection,omitempty"`
				CircuitBreaker *struct {
					MaxParallelRequests int64 `json:"maxParallelRequests,omitempty"`
				} `json:"circuitBreaker,omitempty"`
			} `json:"backendSettings,omitempty"`
			FailOpen       *bool  `json:"failOpen,omitempty"`
			MessageTimeout string `json:"messageTimeout,omitempty"`
			ProcessingMode *struct {
				AllowModeOverride bool `json:"allowModeOverride,omitempty"`
				Request           *struct {
					Body       string   `json:"body,omitempty"`
					Attributes []string `json:"attributes,omitempty"`
				} `json:"request,omitempty"`
				Response *struct {
					Body       string   `json:"body,omitempty"`
					Attributes []string `json:"attributes,omitempty"`
				} `json:"response,omitempty"`
			} `json:"processingMode,omitempty"`
			Metadata *struct {
				AccessibleNamespaces []string `json:"accessibleNamespaces,omitempty"`
				WritableNamespaces   []string `json:"writableNamespaces,omitempty"`
			} `json:"metadata,omitempty"`
		} `json:"extProc"`
	} `json:"spec"`
}

func (p *EnvoyExtensionPolicy) check() error {
	if len(p.Spec.TargetRefs) == 0 || len(p.Spec.ExtProc) == 0 {
		return errors.New("targetRefs and extProc are required")
	}
	return nil
}

// BackendTrafficPolicy mirrors gateway.envoyproxy.io/v1alpha1.
type BackendTrafficPolicy struct {
	crdBase
	Spec struct {
		TargetRefs []gwTargetRef `json:"targetRefs"`
		Connection *struct {
			BufferLimit string `json:"bufferLimit,omitempty"`
		} `json:"connection,omitempty"`
		CircuitBreaker *struct {
			MaxConnections      int64 `json:"maxConnections,omitempty"`
			MaxParallelRequests int64 `json:"maxParallelRequests,omitempty"`
		} `json:"circuitBreaker,omitempty"`
	} `json:"spec"`
}

// ClientTrafficPolicy mirrors gateway.envoyproxy.io/v1alpha1.
type ClientTrafficPolicy struct {
	crdBase
	Spec struct {
		TargetRefs []gwTargetRef `json:"targetRefs"`
		Connection *struct {
			BufferLimit string `json:"bufferLimit,omitempty"`
		} `json:"connection,omitempty"`
		Timeout *struct {
			HTTP *struct {
				StreamIdleTimeout      string `json:"streamIdleTimeout,omitempty"`
				RequestReceivedTimeout string `json:"requestReceivedTimeout,omitempty"`
			} `json:"http,omitempty"`
		} `json:"timeout,omitempty"`
		Path *struct {
			EscapedSlashesAction string `json:"escapedSlashesAction,omitempty"`
		} `json:"path,omitempty"`
	} `json:"spec"`
}

// EnvoyPatchPolicy mirrors gateway.envoyproxy.io/v1alpha1; patch values
// are Envoy config, checked by config/envoy's tests.
type EnvoyPatchPolicy struct {
	crdBase
	Spec struct {
		TargetRef   gwTargetRef `json:"targetRef"`
		Type        string      `json:"type"`
		JSONPatches []struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Operation struct {
				Op    string `json:"op"`
				Path  string `json:"path"`
				Value any    `json:"value,omitempty"`
			} `json:"operation"`
		} `json:"jsonPatches"`
	} `json:"spec"`
}

func (p *EnvoyPatchPolicy) check() error {
	if p.Spec.Type != "JSONPatch" || len(p.Spec.JSONPatches) == 0 {
		return errors.New("want type JSONPatch with jsonPatches")
	}
	return nil
}

// ReferenceGrant mirrors gateway.networking.k8s.io/v1beta1.
type ReferenceGrant struct {
	crdBase
	Spec struct {
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

func (g *ReferenceGrant) check() error {
	if len(g.Spec.From) == 0 || len(g.Spec.To) == 0 {
		return errors.New("from and to are required")
	}
	return nil
}

// EnvoyFilter mirrors networking.istio.io/v1alpha3; patch values are Envoy
// config, checked by config/envoy's tests.
type EnvoyFilter struct {
	crdBase
	Spec struct {
		WorkloadSelector *struct {
			Labels map[string]string `json:"labels"`
		} `json:"workloadSelector,omitempty"`
		ConfigPatches []struct {
			ApplyTo string         `json:"applyTo"`
			Match   map[string]any `json:"match,omitempty"`
			Patch   struct {
				Operation string `json:"operation"`
				Value     any    `json:"value,omitempty"`
			} `json:"patch"`
		} `json:"configPatches"`
	} `json:"spec"`
}

func (f *EnvoyFilter) check() error {
	if f.Spec.WorkloadSelector == nil || len(f.Spec.WorkloadSelector.Labels) == 0 {
		return errors.New("workloadSelector.labels is required (else every workload of the namespace)")
	}
	if len(f.Spec.ConfigPatches) == 0 {
		return errors.New("no configPatches")
	}
	return nil
}
