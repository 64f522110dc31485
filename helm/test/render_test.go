package charttest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestHelmIsThePinnedVersion catches a stale bin/tools/helm after a bump in
// tools/helm/go.mod.
func TestHelmIsThePinnedVersion(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join(repoRoot(t), "tools", "helm", "go.mod"))
	if err != nil {
		t.Fatalf("read tools/helm/go.mod: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v3 (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("tools/helm/go.mod does not require helm.sh/helm/v3")
	}
	want := string(m[1])
	got, err := runHelm(t, "version", "--template", "{{ .Version }}")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(got) != want {
		t.Fatalf("bin/tools/helm reports %q, tools/helm/go.mod pins %s: run `make tools-helm`", got, want)
	}
}

func TestLint(t *testing.T) {
	for _, vs := range valueSets() {
		t.Run(vs.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", "--kube-version", kubeVersion, chartDir(t)}, vs.args(t)...)
			if out, err := runHelm(t, args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestRender renders every value set and holds the result to the invariants.
func TestRender(t *testing.T) {
	for _, vs := range valueSets() {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.args(t)...)
			checkInvariants(t, r)
		})
	}
}

func TestRenderExpectations(t *testing.T) {
	t.Run("default values", func(t *testing.T) {
		r := render(t)
		if len(r.Ingresses) != 0 {
			t.Errorf("the Ingress is opt-in, got %d by default", len(r.Ingresses))
		}
		if n := len(r.Deployments); n != 4 {
			t.Errorf("want 4 Deployments (catalog, authz, bridge, files), got %d", n)
		}
		// Without hostClients only the MCP port is reachable from outside.
		for _, np := range r.NetworkPolicies {
			for _, rule := range np.Spec.Ingress {
				for _, p := range rule.From {
					if p.NamespaceSelector != nil || p.IPBlock != nil {
						t.Errorf("NetworkPolicy %s admits a peer outside the release by default: %+v", np.Name, p)
					}
				}
			}
		}
		if peers, ok := mcpPeers(t, r); !ok || len(peers) != 0 {
			t.Errorf("the MCP port must be open to every source by default, got peers %v (rule found: %v)", peers, ok)
		}
		if c := container(t, deployment(t, r, "bridge"), "bridge"); envValue(c, "SHAREDOS_PUBLIC_URL") !=
			"http://toolshare-sharedos-bridge.sharedos.svc.cluster.local:7480" {
			t.Errorf("bridge public URL without Ingress = %q", envValue(c, "SHAREDOS_PUBLIC_URL"))
		}
		if c := container(t, deployment(t, r, "catalog"), "catalog"); envValue(c, "OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
			t.Error("telemetry must be off (no OTLP endpoint) unless otel.endpoint is set")
		}
	})

	t.Run("ha", func(t *testing.T) {
		r := render(t, "--values", filepath.Join(chartDir(t), "ci/ha-values.yaml"))
		for _, comp := range []string{"catalog", "authz", "bridge", "files"} {
			c := container(t, deployment(t, r, comp), comp)
			if got := envValue(c, "OTEL_EXPORTER_OTLP_ENDPOINT"); got != "https://otel-collector.observability.svc.cluster.local:4317" {
				t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %q", comp, got)
			}
			if e := env(c, "OTEL_EXPORTER_OTLP_HEADERS"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s: OTLP headers must come from a Secret reference", comp)
			}
		}
		if d := deployment(t, r, "catalog"); d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
			t.Errorf("catalog replicas = %v, want 3", d.Spec.Replicas)
		}
	})

	t.Run("external-postgres", func(t *testing.T) {
		r := render(t, "--values", filepath.Join(chartDir(t), "ci/external-postgres-values.yaml"))
		// Least privilege: each service pod (its init container included)
		// holds only its own login; only the migrate Job holds the owner's.
		dbSecret := func(c *corev1.Container) string {
			e := env(c, "SHAREDOS_DATABASE_URL")
			if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != "DATABASE_URL" {
				t.Errorf("%s: database URL must be a DATABASE_URL secret reference, got %+v", c.Name, e)
				return ""
			}
			return e.ValueFrom.SecretKeyRef.Name
		}
		for _, comp := range []string{"catalog", "bridge"} {
			pod := deployment(t, r, comp).Spec.Template.Spec
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				if got, want := dbSecret(&c), "toolshare-prod-postgres-"+comp; got != want {
					t.Errorf("%s container %s: database URL from %s, want its own login %s", comp, c.Name, got, want)
				}
			}
		}
		for _, j := range r.Jobs {
			for _, c := range j.Spec.Template.Spec.Containers {
				if got := dbSecret(&c); got != "toolshare-prod-postgres" {
					t.Errorf("job %s container %s: database URL from %s, want the owner's", j.Name, c.Name, got)
				}
			}
		}
		if !strings.Contains(container(t, deployment(t, r, "catalog"), "catalog").Image, "@sha256:") {
			t.Error("catalog.image.digest must pin the image by digest")
		}
		// Egress is locked down: every pod of the release is selected by an
		// Egress policy.
		for _, d := range r.Deployments {
			if !selectedByPolicyType(r, d.Spec.Template.Labels, "Egress") {
				t.Errorf("%s: no Egress NetworkPolicy selects its pods", d.Name)
			}
		}
		for _, j := range r.Jobs {
			if !selectedByPolicyType(r, j.Spec.Template.Labels, "Egress") {
				t.Errorf("job %s: no Egress NetworkPolicy selects its pods", j.Name)
			}
		}
	})

	t.Run("ingress", func(t *testing.T) {
		r := render(t, "--values", filepath.Join(chartDir(t), "ci/ingress-values.yaml"))
		if len(r.Ingresses) != 1 {
			t.Fatalf("want 1 Ingress, got %d", len(r.Ingresses))
		}
		ing := r.Ingresses[0]
		if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "tools-example-com-tls" {
			t.Errorf("Ingress TLS = %+v", ing.Spec.TLS)
		}
		for _, rule := range ing.Spec.Rules {
			for _, p := range rule.HTTP.Paths {
				if p.Path != "/turns/" {
					t.Errorf("Ingress exposes %q; only /turns/ (the MCP endpoints) may be public", p.Path)
				}
			}
		}
		if peers, ok := mcpPeers(t, r); !ok || len(peers) != 1 || peers[0].NamespaceSelector == nil {
			t.Errorf("networkPolicy.mcpFrom must restrict the MCP port to the ingress controller, got %v", peers)
		}
		c := container(t, deployment(t, r, "bridge"), "bridge")
		if got := envValue(c, "SHAREDOS_PUBLIC_URL"); got != "https://tools.example.com" {
			t.Errorf("bridge public URL behind a TLS Ingress = %q", got)
		}
		if got := envValue(c, "SHAREDOS_TRUSTED_PROXIES"); got != "10.42.0.0/16" {
			t.Errorf("SHAREDOS_TRUSTED_PROXIES = %q", got)
		}
		if got := envValue(c, "SHAREDOS_ALLOWED_ORIGINS"); got != "https://console.example.com" {
			t.Errorf("SHAREDOS_ALLOWED_ORIGINS = %q", got)
		}
	})
}

// TestDecodeIsStrict proves the decoder rejects what the API server would
// silently drop or refuse, so the render tests cannot pass on a typo.
func TestDecodeIsStrict(t *testing.T) {
	cases := map[string]string{
		"unknown field": `apiVersion: v1
kind: Service
metadata: {name: x}
spec: {sesionAffinity: ClientIP}
`,
		"field at the wrong level": `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
        - name: c
          image: i
      livenessProbe: {grpc: {port: 1}}
`,
		"duplicate key": `apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data: {a: "1", a: "2"}
`,
		"unknown kind": `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: x}
`,
		"wrong apiVersion for the kind": `apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata: {name: x}
`,
		"wrong type": `apiVersion: v1
kind: Service
metadata: {name: x}
spec: {ports: [{port: "eighty"}]}
`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := decode("---\n" + doc); err == nil {
				t.Fatal("decode accepted the document")
			}
		})
	}
	ok := "---\n# Source: x\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: \"1\"}\n---\n# only a comment\n"
	r, err := decode(ok)
	if err != nil || len(r.ConfigMaps) != 1 {
		t.Fatalf("decode of a valid document: %v (%d ConfigMaps)", err, len(r.ConfigMaps))
	}
}

// mcpPeers returns the peers of the NetworkPolicy rule that opens the bridge's
// MCP port; ok is false when no rule does.
func mcpPeers(t *testing.T, r *rendered) (peers []networkingv1.NetworkPolicyPeer, ok bool) {
	t.Helper()
	pods := labels.Set(deployment(t, r, "bridge").Spec.Template.Labels)
	for _, np := range r.NetworkPolicies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(pods) {
			continue
		}
		for _, rule := range np.Spec.Ingress {
			if onlyPorts(rulePorts(rule.Ports), mcpPort) {
				return rule.From, true
			}
		}
	}
	return nil, false
}
