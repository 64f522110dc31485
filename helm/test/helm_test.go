package charttest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// releaseName and namespace are what the rendered objects are checked
	// against; any values would do, these read well in failure messages.
	releaseName = "toolshare"
	namespace   = "sharedos"
	// kubeVersion is the oldest minor the chart supports (Chart.yaml
	// kubeVersion) plus a margin: preStop sleep is on by default from 1.30.
	kubeVersion = "1.33.0"
)

// repoRoot is the repository root, two levels above this module.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "helm", "sharedos") }

// helmBin finds the pinned helm binary; a missing one fails the test with the
// command that builds it.
func helmBin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(t), "bin", "tools", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm binary %s not found (%v): run `make tools` (or `make tools-helm`) from the repository root, or set HELM_BIN", bin, err)
	}
	return bin
}

// runHelm runs helm with args and returns stdout; stderr is folded into err.
func runHelm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	// helm must not read or write the developer's config, cache or cluster.
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// valueSet is one way of installing the chart: the default values, or the
// defaults plus one ci/ file.
type valueSet struct {
	name string
	file string // relative to the chart; empty for the defaults
}

func valueSets() []valueSet {
	return []valueSet{
		{name: "default"},
		{name: "ha", file: "ci/ha-values.yaml"},
		{name: "external-postgres", file: "ci/external-postgres-values.yaml"},
		{name: "ingress", file: "ci/ingress-values.yaml"},
		{name: "existing-tls", file: "ci/existing-tls-values.yaml"},
		{name: "cluster-issuer", file: "ci/cluster-issuer-values.yaml"},
	}
}

func (v valueSet) args(t testing.TB) []string {
	if v.file == "" {
		return nil
	}
	return []string{"--values", filepath.Join(chartDir(t), v.file)}
}

// template renders the chart (hooks included) with extra helm flags.
func template(t testing.TB, extra ...string) (string, error) {
	t.Helper()
	args := append([]string{"template", releaseName, chartDir(t),
		"--namespace", namespace, "--kube-version", kubeVersion}, extra...)
	return runHelm(t, args...)
}

// writeValues writes a values file into the test's temp dir.
func writeValues(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatalf("write values: %v", err)
	}
	return p
}

// rendered is one render, decoded into typed objects.
type rendered struct {
	Deployments     []*appsv1.Deployment
	Services        []*corev1.Service
	ConfigMaps      []*corev1.ConfigMap
	ServiceAccounts []*corev1.ServiceAccount
	Secrets         []*corev1.Secret
	Jobs            []*batchv1.Job
	PDBs            []*policyv1.PodDisruptionBudget
	HPAs            []*autoscalingv2.HorizontalPodAutoscaler
	NetworkPolicies []*networkingv1.NetworkPolicy
	Ingresses       []*networkingv1.Ingress
	Certificates    []*certmanagerv1.Certificate
	Issuers         []*certmanagerv1.Issuer
	// All holds every object's metadata with its kind, in render order.
	All []object
}

type object struct {
	Kind string
	Meta *metav1.ObjectMeta
}

// sourceComment is the "# Source: chart/templates/x.yaml" line helm puts
// before each document; kept for error messages.
var sourceComment = regexp.MustCompile(`(?m)^# Source: (\S+)`)

// decode splits a multi-document render and strictly decodes each document
// into the Go type its apiVersion/kind names. An unknown kind, an unknown
// field or a duplicated key is an error.
func decode(manifest string) (*rendered, error) {
	r := &rendered{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("split documents: %w", err)
		}
		source := "unknown template"
		if m := sourceComment.FindSubmatch(doc); m != nil {
			source = string(m[1])
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: read apiVersion/kind: %w", source, err)
		}
		if tm.APIVersion == "" && tm.Kind == "" {
			if isBlank(doc) {
				continue
			}
			return nil, fmt.Errorf("%s: document without apiVersion and kind", source)
		}
		if err := r.add(tm, doc); err != nil {
			return nil, fmt.Errorf("%s: %s %s: %w", source, tm.APIVersion, tm.Kind, err)
		}
	}
	return r, nil
}

// isBlank reports whether a document holds only comments and whitespace.
func isBlank(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return false
		}
	}
	return true
}

// strict decodes doc into out, rejecting unknown fields and duplicate keys.
func strict[T any](doc []byte, out *T) (*T, error) {
	if err := yaml.UnmarshalStrict(doc, out); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *rendered) add(tm metav1.TypeMeta, doc []byte) error {
	record := func(m *metav1.ObjectMeta) { r.All = append(r.All, object{Kind: tm.Kind, Meta: m}) }
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/Deployment":
		o, err := strict(doc, &appsv1.Deployment{})
		if err != nil {
			return err
		}
		r.Deployments = append(r.Deployments, o)
		record(&o.ObjectMeta)
	case "v1/Service":
		o, err := strict(doc, &corev1.Service{})
		if err != nil {
			return err
		}
		r.Services = append(r.Services, o)
		record(&o.ObjectMeta)
	case "v1/ConfigMap":
		o, err := strict(doc, &corev1.ConfigMap{})
		if err != nil {
			return err
		}
		r.ConfigMaps = append(r.ConfigMaps, o)
		record(&o.ObjectMeta)
	case "v1/ServiceAccount":
		o, err := strict(doc, &corev1.ServiceAccount{})
		if err != nil {
			return err
		}
		r.ServiceAccounts = append(r.ServiceAccounts, o)
		record(&o.ObjectMeta)
	case "v1/Secret":
		o, err := strict(doc, &corev1.Secret{})
		if err != nil {
			return err
		}
		r.Secrets = append(r.Secrets, o)
		record(&o.ObjectMeta)
	case "batch/v1/Job":
		o, err := strict(doc, &batchv1.Job{})
		if err != nil {
			return err
		}
		r.Jobs = append(r.Jobs, o)
		record(&o.ObjectMeta)
	case "policy/v1/PodDisruptionBudget":
		o, err := strict(doc, &policyv1.PodDisruptionBudget{})
		if err != nil {
			return err
		}
		r.PDBs = append(r.PDBs, o)
		record(&o.ObjectMeta)
	case "autoscaling/v2/HorizontalPodAutoscaler":
		o, err := strict(doc, &autoscalingv2.HorizontalPodAutoscaler{})
		if err != nil {
			return err
		}
		r.HPAs = append(r.HPAs, o)
		record(&o.ObjectMeta)
	case "networking.k8s.io/v1/NetworkPolicy":
		o, err := strict(doc, &networkingv1.NetworkPolicy{})
		if err != nil {
			return err
		}
		r.NetworkPolicies = append(r.NetworkPolicies, o)
		record(&o.ObjectMeta)
	case "networking.k8s.io/v1/Ingress":
		o, err := strict(doc, &networkingv1.Ingress{})
		if err != nil {
			return err
		}
		r.Ingresses = append(r.Ingresses, o)
		record(&o.ObjectMeta)
	case "cert-manager.io/v1/Certificate":
		o, err := strict(doc, &certmanagerv1.Certificate{})
		if err != nil {
			return err
		}
		r.Certificates = append(r.Certificates, o)
		record(&o.ObjectMeta)
	case "cert-manager.io/v1/Issuer":
		o, err := strict(doc, &certmanagerv1.Issuer{})
		if err != nil {
			return err
		}
		r.Issuers = append(r.Issuers, o)
		record(&o.ObjectMeta)
	default:
		return errors.New("kind not known to the test: add its k8s.io/api (or cert-manager) type to decode() before rendering it")
	}
	return nil
}

// render templates the chart with a value set and decodes it; any failure is
// fatal.
func render(t testing.TB, extra ...string) *rendered {
	t.Helper()
	out, err := template(t, extra...)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	r, err := decode(out)
	if err != nil {
		t.Fatalf("decode rendered chart strictly: %v", err)
	}
	return r
}
