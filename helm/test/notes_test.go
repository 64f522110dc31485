package charttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// notes renders the chart's NOTES.txt with extra helm flags. helm template
// leaves NOTES out, so a copy of the chart renders it into a ConfigMap.
func notes(t *testing.T, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sharedos")
	if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "templates", "NOTES.txt"), filepath.Join(dir, "notes.tpl")); err != nil {
		t.Fatal(err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ tpl (.Files.Get \"notes.tpl\") . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(cm), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"template", releaseName, dir, "--namespace", namespace, "--kube-version", kubeVersion,
		"--show-only", "templates/zz-notes.yaml"}, extra...)
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("render NOTES: %v", err)
	}
	var c corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(out), &c); err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	return c.Data["notes"]
}

// NOTES names the Secret of an identity the values configure, never one
// the release does not make.
func TestNotesNameAnIdentityTheReleaseMakes(t *testing.T) {
	full := releaseName + "-sharedos"
	if n := notes(t); strings.Contains(n, "get secret") || !strings.Contains(n, "tls.certManager.clientIdentities: [{name: ops, role: operator}]") {
		t.Errorf("no identity configured:\n%s", n)
	}
	n := notes(t, "--set", "tls.certManager.clientIdentities[0].name=reader", "--set", "tls.certManager.clientIdentities[0].role=operator")
	if !strings.Contains(n, "get secret "+full+"-reader-tls") || strings.Contains(n, full+"-ops-tls") {
		t.Errorf("identity reader configured:\n%s", n)
	}
}
