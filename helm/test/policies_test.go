package charttest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestPolicyChangeRollsOnlyAuthz: editing a policy changes the authz pod
// template (so the Deployment rolls) and nothing else's.
func TestPolicyChangeRollsOnlyAuthz(t *testing.T) {
	base := render(t)
	changed := render(t, "--values", writeValues(t, "authz:\n  policies:\n    extra.rego: |\n      package sharedos.extra\n      x := 1\n"))
	again := render(t, "--values", writeValues(t, "authz:\n  policies:\n    extra.rego: |\n      package sharedos.extra\n      x := 2\n"))

	sum := func(r *rendered) string {
		return deployment(t, r, "authz").Spec.Template.Annotations["checksum/policies"]
	}
	if sum(base) == sum(changed) || sum(changed) == sum(again) {
		t.Errorf("checksum/policies did not change with the policies: %s, %s, %s", sum(base), sum(changed), sum(again))
	}
	if sum(base) != sum(render(t)) {
		t.Error("checksum/policies is not stable across identical renders")
	}
	for _, comp := range []string{"catalog", "bridge", "files"} {
		if !reflect.DeepEqual(deployment(t, base, comp).Spec.Template, deployment(t, changed, comp).Spec.Template) {
			t.Errorf("a policy change altered the %s pod template (it would roll for nothing)", comp)
		}
	}
	var data map[string]string
	for _, cm := range changed.ConfigMaps {
		if strings.HasSuffix(cm.Name, "-authz-policies") {
			data = cm.Data
		}
	}
	if !strings.Contains(data["extra.rego"], "package sharedos.extra") {
		t.Errorf("policies ConfigMap lacks the value-supplied extra.rego: %v", data)
	}
}

// TestPolicyTreeIsMounted: every policy file reaches the policy directory at
// its relative path, as a subPath mount (a regular file, not a symlink into
// the ConfigMap's hidden ..data directory, which fails the load).
func TestPolicyTreeIsMounted(t *testing.T) {
	r := render(t, "--values", writeValues(t, "authz:\n  policies:\n    site/local.rego: |\n      package sharedos.site\n"))
	want := policyFiles(t, filepath.Join(repoRoot(t), "helm", "sharedos", "policies"))
	want["site/local.rego"] = []byte("package sharedos.site\n")
	var data map[string]string
	for _, cm := range r.ConfigMaps {
		if strings.HasSuffix(cm.Name, "-authz-policies") {
			data = cm.Data
		}
	}
	c := container(t, deployment(t, r, "authz"), "authz")
	dir := envValue(c, "SHAREDOS_POLICY_DIR")
	mounts := map[string]string{} // relative path -> ConfigMap key
	for _, m := range c.VolumeMounts {
		if m.Name != "policies" {
			continue
		}
		if !m.ReadOnly || m.SubPath == "" {
			t.Errorf("policy mount %s must be a read-only subPath mount", m.MountPath)
		}
		rel, ok := strings.CutPrefix(m.MountPath, dir+"/")
		if !ok {
			t.Errorf("policy mount %s is outside SHAREDOS_POLICY_DIR %s", m.MountPath, dir)
		}
		mounts[rel] = m.SubPath
	}
	if len(mounts) != len(want) {
		t.Errorf("mounted %d policy files, want %d: %v", len(mounts), len(want), mounts)
	}
	for rel, body := range want {
		key, ok := mounts[rel]
		if !ok {
			t.Errorf("policy %s is not mounted", rel)
			continue
		}
		if data[key] != string(body) {
			t.Errorf("policy %s: ConfigMap key %s does not hold the file's content", rel, key)
		}
	}
}

// TestChartPoliciesMatchDeploy keeps the chart's copy of the example policies
// (helm/sharedos/policies, packaged with the chart) identical to
// deploy/policies. Fix a failure with `make helm-policies`.
func TestChartPoliciesMatchDeploy(t *testing.T) {
	root := repoRoot(t)
	want := policyFiles(t, filepath.Join(root, "deploy", "policies"))
	got := policyFiles(t, filepath.Join(root, "helm", "sharedos", "policies"))
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		w, inDeploy := want[n]
		g, inChart := got[n]
		switch {
		case !inChart:
			t.Errorf("deploy/policies/%s is missing from helm/sharedos/policies: run `make helm-policies`", n)
		case !inDeploy:
			t.Errorf("helm/sharedos/policies/%s has no counterpart in deploy/policies: run `make helm-policies`", n)
		case !bytes.Equal(w, g):
			t.Errorf("helm/sharedos/policies/%s differs from deploy/policies/%s: run `make helm-policies`", n, n)
		}
	}
}

// policyFiles reads the files authz serves from a directory tree, by
// slash-separated relative path: Rego (not Rego tests) and JSON/YAML data,
// hidden files and directories skipped. A missing directory holds none.
func policyFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return out
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n := d.Name()
		if d.IsDir() {
			if p != dir && strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		served := strings.HasSuffix(n, ".rego") || strings.HasSuffix(n, ".json") ||
			strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")
		if !served || strings.HasSuffix(n, "_test.rego") || strings.HasPrefix(n, ".") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return out
}
