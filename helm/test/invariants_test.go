package charttest

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	componentLabel = "app.kubernetes.io/component"
	// livenessService is the grpc.health.v1 service every server answers
	// SERVING while the process runs, whatever the database does.
	livenessService = "liveness"
	mcpPort         = 7480
	bridgeGRPCPort  = 7403
	catalogPort     = 7401
)

// checkInvariants holds one render to the rules every install must keep.
func checkInvariants(t *testing.T, r *rendered) {
	t.Helper()
	checkNames(t, r)
	if len(r.Secrets) != 0 {
		t.Errorf("the chart renders %d Secret(s); it must only reference Secrets the operator created", len(r.Secrets))
	}
	for _, comp := range []string{"catalog", "authz", "bridge"} {
		deployment(t, r, comp) // fails when missing
	}
	for _, d := range r.Deployments {
		checkDeployment(t, r, d)
	}
	checkRecordJournal(t, r)
	checkPDBs(t, r)
	checkHPAs(t, r)
	checkMigrateJob(t, r)
	checkServices(t, r)
	checkIngress(t, r)
	checkNetworkPolicies(t, r)
	checkPolicies(t, r)
	checkTLS(t, r)
	checkMountedKey(t, r, grantKey)
	checkMountedKey(t, r, stateKey)
}

// mountedKey is an Ed25519 private key a workload reads from Secrets: the
// current one and the retired ones it still accepts.
type mountedKey struct {
	component  string // Deployment component and container name
	what       string // in messages
	envCurrent string // the current key's file
	envRetired string // comma-separated retired keys' files
	dir        string // mounts: <dir>/current, <dir>/retired-N
	volume     string // volume name prefix
}

var (
	// grantKey: every kernel replica signs turn grants (ADR 0015) with the
	// same key, kept across renewals (grants of open turns stay valid).
	grantKey = mountedKey{component: "catalog", what: "grant key", envCurrent: "SHAREDOS_GRANT_KEY",
		envRetired: "SHAREDOS_GRANT_RETIRED_KEYS", dir: "/etc/sharedos/grants", volume: "grant-key"}
	// stateKey: every bridge pod seals input-required requestStates
	// (ADR 0017) with the same key: a state sealed by one pod is opened by
	// another.
	stateKey = mountedKey{component: "bridge", what: "request-state key", envCurrent: "SHAREDOS_STATE_KEY",
		envRetired: "SHAREDOS_STATE_RETIRED_KEYS", dir: "/etc/sharedos/request-state", volume: "state-key"}
)

// checkMountedKey: the workload reads the key from a Secret mounted
// read-only, never world-readable, and every retired key it names is one
// too; with cert-manager the chart's Certificate writes the current one as an
// Ed25519 key in PKCS #8 that is kept across renewals.
func checkMountedKey(t *testing.T, r *rendered, k mountedKey) {
	t.Helper()
	d := deployment(t, r, k.component)
	pod := d.Spec.Template.Spec
	c := container(t, d, k.component)
	if got, want := envValue(c, k.envCurrent), k.dir+"/current/tls.key"; got != want {
		t.Errorf("%s: %s = %q, want %s", k.component, k.envCurrent, got, want)
	}
	secrets := map[string]string{} // mount path → Secret
	for _, v := range pod.Volumes {
		if v.Secret == nil || !strings.HasPrefix(v.Name, k.volume) {
			continue
		}
		if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
			t.Errorf("%s: %s volume %s is world-readable", k.component, k.what, v.Name)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				if !m.ReadOnly {
					t.Errorf("%s: %s volume %s is mounted writable", k.component, k.what, v.Name)
				}
				secrets[m.MountPath] = v.Secret.SecretName
			}
		}
	}
	current := secrets[k.dir+"/current"]
	if current == "" {
		t.Fatalf("%s: no %s Secret mounted at %s/current", k.component, k.what, k.dir)
	}
	var retired []string
	for _, f := range strings.Split(envValue(c, k.envRetired), ",") {
		if f == "" {
			continue
		}
		dir := strings.TrimSuffix(f, "/tls.key")
		if secrets[dir] == "" {
			t.Errorf("%s: retired %s %s is not a mounted Secret", k.component, k.what, f)
		}
		retired = append(retired, secrets[dir])
	}
	if len(secrets) != 1+len(retired) {
		t.Errorf("%s: %s mounts %v, %s names %d retired", k.component, k.what, secrets, k.envRetired, len(retired))
	}
	if len(r.Certificates) == 0 {
		return // the operator's Secrets
	}
	var cert *certmanagerv1.Certificate
	for _, c := range r.Certificates {
		if c.Spec.SecretName == current {
			cert = c
		}
	}
	if cert == nil {
		t.Fatalf("no Certificate writes the %s Secret %s", k.what, current)
	}
	if pk := cert.Spec.PrivateKey; pk == nil || pk.Algorithm != certmanagerv1.Ed25519KeyAlgorithm ||
		pk.Encoding != certmanagerv1.PKCS8 || pk.RotationPolicy != certmanagerv1.RotationPolicyNever {
		t.Errorf("%s Certificate %s: private key %+v, want Ed25519, PKCS8, never rotated on renewal", k.what, cert.Name, cert.Spec.PrivateKey)
	}
}

// trustDomain is the host of a Certificate's first URI.
func trustDomain(c *certmanagerv1.Certificate) string {
	if len(c.Spec.URIs) == 0 {
		return ""
	}
	host, _, _ := strings.Cut(strings.TrimPrefix(c.Spec.URIs[0], "spiffe://"), "/")
	return host
}

// tlsRoles is the SPIFFE role each workload's identity carries.
var tlsRoles = map[string]string{"catalog": "catalog", "authz": "authz", "bridge": "bridge", "files": "provider"}

// checkTLS: every workload runs the internal plane with mutual TLS from a
// mounted Secret, never in plaintext; with cert-manager each Secret comes
// from a Certificate whose URI SAN is the workload's SPIFFE identity,
// usable as server and client, signed by an issuer the release names.
func checkTLS(t *testing.T, r *rendered) {
	t.Helper()
	certs := map[string]*certmanagerv1.Certificate{}
	for _, c := range r.Certificates {
		certs[c.Spec.SecretName] = c
	}
	issuers := map[string]*certmanagerv1.Issuer{}
	for _, i := range r.Issuers {
		issuers[i.Name] = i
	}
	for _, d := range r.Deployments {
		comp := d.Spec.Template.Labels["app.kubernetes.io/component"]
		pod := d.Spec.Template.Spec
		secret := ""
		for _, v := range pod.Volumes {
			if v.Name == "tls" && v.Secret != nil {
				secret = v.Secret.SecretName
				if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
					t.Errorf("Deployment %s: the TLS key must not be world-readable (defaultMode %v)", d.Name, v.Secret.DefaultMode)
				}
			}
		}
		if secret == "" {
			t.Errorf("Deployment %s: no Secret volume named tls", d.Name)
			continue
		}
		c := &pod.Containers[0]
		mounted := false
		for _, m := range c.VolumeMounts {
			if m.Name == "tls" && m.MountPath == "/etc/sharedos/tls" && m.ReadOnly {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("Deployment %s: the tls volume is not mounted read-only at /etc/sharedos/tls", d.Name)
		}
		for env, file := range map[string]string{"SHAREDOS_TLS_CA": "ca.crt", "SHAREDOS_TLS_CERT": "tls.crt", "SHAREDOS_TLS_KEY": "tls.key"} {
			if got := envValue(c, env); got != "/etc/sharedos/tls/"+file {
				t.Errorf("Deployment %s: %s = %q, want /etc/sharedos/tls/%s", d.Name, env, got, file)
			}
		}
		if env(c, "SHAREDOS_INSECURE_PLAINTEXT") != nil {
			t.Errorf("Deployment %s: the internal plane must not run in plaintext", d.Name)
		}
		if len(r.Certificates) == 0 {
			continue // existing Secrets: the operator's
		}
		cert := certs[secret]
		if cert == nil {
			t.Errorf("Deployment %s: no Certificate writes its Secret %s", d.Name, secret)
			continue
		}
		want := "spiffe://" + trustDomain(cert) + "/" + tlsRoles[comp] + "/" + d.Name
		if !slices.Equal(cert.Spec.URIs, []string{want}) {
			t.Errorf("Certificate %s: URIs %v, want [%s]", cert.Name, cert.Spec.URIs, want)
		}
		for _, u := range []certmanagerv1.KeyUsage{certmanagerv1.UsageServerAuth, certmanagerv1.UsageClientAuth} {
			if !slices.Contains(cert.Spec.Usages, u) {
				t.Errorf("Certificate %s: usages %v lack %s (mutual TLS)", cert.Name, cert.Spec.Usages, u)
			}
		}
		if cert.Spec.PrivateKey == nil || cert.Spec.PrivateKey.RotationPolicy != certmanagerv1.RotationPolicyAlways {
			t.Errorf("Certificate %s: the private key must rotate with the certificate", cert.Name)
		}
		if ref := cert.Spec.IssuerRef; ref.Kind == "Issuer" && issuers[ref.Name] == nil {
			t.Errorf("Certificate %s: Issuer %s is not in the release", cert.Name, ref.Name)
		}
	}
}

func checkNames(t *testing.T, r *rendered) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range r.All {
		key := o.Kind + "/" + o.Meta.Name
		if seen[key] {
			t.Errorf("%s rendered twice", key)
		}
		seen[key] = true
		if errs := validation.IsDNS1123Subdomain(o.Meta.Name); len(errs) > 0 {
			t.Errorf("%s: invalid name: %v", key, errs)
		}
		if o.Kind == "Service" {
			if errs := validation.IsDNS1035Label(o.Meta.Name); len(errs) > 0 {
				t.Errorf("%s: a Service name must be a DNS-1035 label: %v", key, errs)
			}
		}
		for k, v := range o.Meta.Labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("%s: label key %q: %v", key, k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: label %s=%q: %v", key, k, v, errs)
			}
		}
	}
}

func checkDeployment(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	name := "Deployment " + d.Name
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%s: selector %v must be non-empty and match the pod template labels (%v)", name, d.Spec.Selector, err)
	}

	s := d.Spec.Strategy
	switch {
	case s.Type == appsv1.RecreateDeploymentStrategyType && mountsClaim(&d.Spec.Template.Spec):
		// A single-attach claim cannot be mounted by a surge pod
		// (TestFilesStrategyFollowsClaimAccessMode).
	case s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil:
		t.Errorf("%s: strategy must be RollingUpdate (Recreate only for a pod on a PersistentVolumeClaim)", name)
	default:
		if s.RollingUpdate.MaxUnavailable == nil || intOrPercent(s.RollingUpdate.MaxUnavailable) != 0 {
			t.Errorf("%s: rollingUpdate.maxUnavailable must be 0, got %v", name, s.RollingUpdate.MaxUnavailable)
		}
		if s.RollingUpdate.MaxSurge == nil || intOrPercent(s.RollingUpdate.MaxSurge) < 1 {
			t.Errorf("%s: rollingUpdate.maxSurge must be at least 1 when maxUnavailable is 0, got %v", name, s.RollingUpdate.MaxSurge)
		}
	}

	pod := d.Spec.Template.Spec
	checkPodSpec(t, name, &pod)
	if pod.TerminationGracePeriodSeconds == nil {
		t.Errorf("%s: terminationGracePeriodSeconds must be set", name)
	}
	if len(pod.Containers) == 0 {
		t.Fatalf("%s: no containers", name)
	}
	usesDatabase := false
	for i := range pod.Containers {
		c := &pod.Containers[i]
		cname := fmt.Sprintf("%s container %s", name, c.Name)
		checkContainerBasics(t, cname, c)
		checkProbes(t, cname, c)
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 1 {
			t.Errorf("%s: needs a preStop sleep so endpoint removal propagates before SIGTERM", cname)
		} else if pod.TerminationGracePeriodSeconds != nil && *pod.TerminationGracePeriodSeconds <= c.Lifecycle.PreStop.Sleep.Seconds {
			t.Errorf("%s: terminationGracePeriodSeconds (%d) must exceed the preStop sleep (%d) to leave time to drain",
				cname, *pod.TerminationGracePeriodSeconds, c.Lifecycle.PreStop.Sleep.Seconds)
		}
		if envValue(c, "OTEL_SERVICE_NAME") == "" {
			t.Errorf("%s: OTEL_SERVICE_NAME is not set", cname)
		}
		if env(c, "SHAREDOS_DATABASE_URL") != nil {
			usesDatabase = true
		}
	}
	for i := range pod.InitContainers {
		c := &pod.InitContainers[i]
		cname := fmt.Sprintf("%s init container %s", name, c.Name)
		checkContainerBasics(t, cname, c)
	}
	checkVolumes(t, name, &pod)
	// Every pod that talks to PostgreSQL waits for its own service's
	// migrations: `migrate --check` of the same image as the main container.
	if usesDatabase {
		found := false
		for _, c := range pod.InitContainers {
			if slices.Equal(c.Args, []string{"migrate", "--check"}) && c.Image == pod.Containers[0].Image {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: uses the database but has no `migrate --check` init container on its own image", name)
		}
	}
}

// mountsClaim reports whether a pod has a PersistentVolumeClaim volume.
func mountsClaim(pod *corev1.PodSpec) bool {
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			return true
		}
	}
	return false
}

// checkVolumes: every mount names a pod volume, and no two mounts of one
// container share a path (the API server rejects both).
func checkVolumes(t *testing.T, name string, pod *corev1.PodSpec) {
	t.Helper()
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		if volumes[v.Name] {
			t.Errorf("%s: volume %s declared twice", name, v.Name)
		}
		volumes[v.Name] = true
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		paths := map[string]bool{}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s container %s: mount %s names no volume %q", name, c.Name, m.MountPath, m.Name)
			}
			if paths[m.MountPath] {
				t.Errorf("%s container %s: two mounts at %s", name, c.Name, m.MountPath)
			}
			paths[m.MountPath] = true
		}
	}
}

// checkRecordJournal: catalog-svc's journal of record completions (ADR 0007)
// is a writable emptyDir mounted where --record-journal-dir points, so it
// outlives a container restart (a SIGKILLed kernel's successor replays it).
func checkRecordJournal(t *testing.T, r *rendered) {
	t.Helper()
	d := deployment(t, r, "catalog")
	c := container(t, d, "catalog")
	dir := envValue(c, "SHAREDOS_RECORD_JOURNAL_DIR")
	if dir == "" {
		t.Errorf("catalog: SHAREDOS_RECORD_JOURNAL_DIR is not set")
		return
	}
	var vol string
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir && !m.ReadOnly {
			vol = m.Name
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == vol && v.EmptyDir != nil {
			return
		}
	}
	t.Errorf("catalog: the record journal %s is not a writable emptyDir mount (mounts %v)", dir, c.VolumeMounts)
}

// checkPodSpec covers the pod-level hardening shared by Deployments and Jobs.
func checkPodSpec(t *testing.T, name string, pod *corev1.PodSpec) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false (the services never call the API server)", name)
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("%s: enableServiceLinks must be false (service links inject SHAREDOS_* look-alike variables)", name)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot must be true", name)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccompProfile must be RuntimeDefault", name)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("%s: must not share host namespaces", name)
	}
}

var pinnedImage = regexp.MustCompile(`^[^:@\s]+(:[A-Za-z0-9_][A-Za-z0-9_.-]*|@sha256:[a-f0-9]{64})$`)

// sensitiveEnv names variables whose value must come from a Secret.
var sensitiveEnv = regexp.MustCompile(`(?i)(PASSWORD|SECRET|TOKEN|DATABASE_URL|DSN|PRIVATE|SIGNING|API_KEY|HEADERS)`)

func checkContainerBasics(t *testing.T, name string, c *corev1.Container) {
	t.Helper()
	if !pinnedImage.MatchString(c.Image) || strings.HasSuffix(c.Image, ":latest") {
		t.Errorf("%s: image %q must be pinned by a version tag or a digest", name, c.Image)
	}
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() {
		t.Errorf("%s: resources.requests.cpu and .memory are required, got %v", name, req)
	}
	if lim.Memory().IsZero() {
		t.Errorf("%s: resources.limits.memory is required", name)
	}
	for _, rl := range []corev1.ResourceList{req, lim} {
		for res := range rl {
			if res != corev1.ResourceCPU && res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage {
				t.Errorf("%s: unexpected resource %q (a typo is silently ignored by the scheduler)", name, res)
			}
		}
	}
	if !req.Memory().IsZero() && !lim.Memory().IsZero() && lim.Memory().Cmp(*req.Memory()) < 0 {
		t.Errorf("%s: memory limit %v is below the request %v", name, lim.Memory(), req.Memory())
	}

	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s: securityContext is required", name)
	default:
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: securityContext.runAsNonRoot must be true", name)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("%s: securityContext.runAsUser must not be 0", name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: securityContext.allowPrivilegeEscalation must be false", name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: securityContext.readOnlyRootFilesystem must be true", name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: must not be privileged", name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: capabilities must drop ALL and add none, got %+v", name, sc.Capabilities)
		}
	}

	for _, e := range c.Env {
		if sensitiveEnv.MatchString(e.Name) && e.Value != "" {
			t.Errorf("%s: %s carries a literal value; secrets must be secretKeyRef references", name, e.Name)
		}
		if e.Name == "SHAREDOS_DATABASE_URL" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s: SHAREDOS_DATABASE_URL must come from a secretKeyRef", name)
		}
	}
}

// checkProbes: native gRPC probes on the container's grpc port; liveness (and
// startup) ask the "liveness" service, which never depends on PostgreSQL;
// readiness asks the overall service "", which does.
func checkProbes(t *testing.T, name string, c *corev1.Container) {
	t.Helper()
	// The plane's port speaks mutual TLS, which kubelet probes cannot: the
	// probes ask the plaintext health-only listener (SHAREDOS_HEALTH_LISTEN).
	port := containerPort(c, "health")
	if port == 0 {
		t.Errorf("%s: no container port named health", name)
	}
	if got := envValue(c, "SHAREDOS_HEALTH_LISTEN"); got != fmt.Sprintf(":%d", port) {
		t.Errorf("%s: SHAREDOS_HEALTH_LISTEN = %q, want the health port :%d", name, got, port)
	}
	check := func(kind string, p *corev1.Probe, wantService string) {
		if p == nil {
			t.Errorf("%s: %s probe is missing", name, kind)
			return
		}
		if p.GRPC == nil {
			t.Errorf("%s: %s probe must be a native gRPC probe", name, kind)
			return
		}
		if p.GRPC.Port != port {
			t.Errorf("%s: %s probe port %d, want the health port %d", name, kind, p.GRPC.Port, port)
		}
		got := ""
		if p.GRPC.Service != nil {
			got = *p.GRPC.Service
		}
		if got != wantService {
			t.Errorf("%s: %s probe asks health service %q, want %q", name, kind, got, wantService)
		}
		if p.TimeoutSeconds < 1 || p.PeriodSeconds < 1 || p.FailureThreshold < 1 {
			t.Errorf("%s: %s probe timings must be set: %+v", name, kind, p.ProbeHandler)
		}
	}
	check("liveness", c.LivenessProbe, livenessService)
	check("readiness", c.ReadinessProbe, "")
	if c.StartupProbe != nil {
		check("startup", c.StartupProbe, livenessService)
	}
}

func checkPDBs(t *testing.T, r *rendered) {
	t.Helper()
	for _, d := range r.Deployments {
		var covering []string
		for _, pdb := range r.PDBs {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				t.Errorf("PDB %s: selector: %v", pdb.Name, err)
				continue
			}
			if !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				covering = append(covering, pdb.Name)
			}
		}
		if len(covering) != 1 {
			t.Errorf("Deployment %s: want exactly one PodDisruptionBudget, got %v", d.Name, covering)
		}
	}
	for _, pdb := range r.PDBs {
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			t.Errorf("PDB %s: set exactly one of minAvailable and maxUnavailable", pdb.Name)
		}
		matched := false
		for _, d := range r.Deployments {
			sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				matched = true
				if pdb.Spec.MinAvailable != nil && d.Spec.Replicas != nil &&
					intOrPercent(pdb.Spec.MinAvailable) >= int(*d.Spec.Replicas) {
					t.Errorf("PDB %s: minAvailable %v >= replicas %d blocks every drain", pdb.Name, pdb.Spec.MinAvailable, *d.Spec.Replicas)
				}
			}
		}
		if !matched {
			t.Errorf("PDB %s selects no Deployment", pdb.Name)
		}
	}
}

func checkHPAs(t *testing.T, r *rendered) {
	t.Helper()
	for _, comp := range []string{"authz", "bridge"} {
		d := deployment(t, r, comp)
		var found bool
		for _, h := range r.HPAs {
			ref := h.Spec.ScaleTargetRef
			if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != d.Name {
				continue
			}
			found = true
			if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
				t.Errorf("HPA %s: replicas range %v..%d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
			}
			if d.Spec.Replicas != nil {
				t.Errorf("Deployment %s: replicas must be unset when an HPA owns it (every upgrade would reset the scale)", d.Name)
			}
			if len(h.Spec.Metrics) == 0 {
				t.Errorf("HPA %s: no metrics", h.Name)
			}
			for _, pdb := range r.PDBs {
				sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if sel.Matches(labels.Set(d.Spec.Template.Labels)) && pdb.Spec.MinAvailable != nil &&
					h.Spec.MinReplicas != nil && intOrPercent(pdb.Spec.MinAvailable) >= int(*h.Spec.MinReplicas) {
					t.Errorf("PDB %s: minAvailable %v >= HPA minReplicas %d blocks drains", pdb.Name, pdb.Spec.MinAvailable, *h.Spec.MinReplicas)
				}
			}
		}
		if !found {
			t.Errorf("no HorizontalPodAutoscaler targets Deployment %s", d.Name)
		}
	}
	for _, h := range r.HPAs {
		ok := false
		for _, d := range r.Deployments {
			ok = ok || d.Name == h.Spec.ScaleTargetRef.Name
		}
		if !ok {
			t.Errorf("HPA %s targets %s, which is not rendered", h.Name, h.Spec.ScaleTargetRef.Name)
		}
	}
}

func checkMigrateJob(t *testing.T, r *rendered) {
	t.Helper()
	if len(r.Jobs) != 1 {
		t.Fatalf("want exactly one Job (migrate), got %d", len(r.Jobs))
	}
	j := r.Jobs[0]
	name := "Job " + j.Name
	hooks := strings.Split(j.Annotations["helm.sh/hook"], ",")
	if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
		t.Errorf("%s: must be a pre-install,pre-upgrade hook, got %q", name, j.Annotations["helm.sh/hook"])
	}
	pod := j.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever && pod.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("%s: restartPolicy %q", name, pod.RestartPolicy)
	}
	if j.Spec.BackoffLimit == nil || j.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("%s: backoffLimit and activeDeadlineSeconds bound a failing migration", name)
	}
	checkPodSpec(t, name, &pod)
	checkVolumes(t, name, &pod)
	// Each service that owns a schema migrates it with its own image.
	steps := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
	migrated := map[string]bool{}
	for i := range steps {
		c := &steps[i]
		checkContainerBasics(t, name+" container "+c.Name, c)
		if !slices.Equal(c.Args, []string{"migrate"}) {
			t.Errorf("%s: container %s runs %v, want [migrate]", name, c.Name, c.Args)
		}
		migrated[c.Image] = true
	}
	for _, comp := range []string{"catalog", "bridge"} {
		img := container(t, deployment(t, r, comp), comp).Image
		if !migrated[img] {
			t.Errorf("%s: does not run `migrate` with the %s image %s", name, comp, img)
		}
	}
	// A hook runs before the release's ordinary objects exist: anything it
	// references from the chart must itself be an earlier hook.
	jobWeight := hookWeight(t, j.Annotations)
	for _, sa := range r.ServiceAccounts {
		if sa.Name != pod.ServiceAccountName {
			continue
		}
		if sa.Annotations["helm.sh/hook"] != j.Annotations["helm.sh/hook"] || hookWeight(t, sa.Annotations) >= jobWeight {
			t.Errorf("%s uses ServiceAccount %s, which is not created by an earlier hook (it would not exist on install)", name, sa.Name)
		}
	}
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		for _, cm := range r.ConfigMaps {
			if cm.Name == v.ConfigMap.Name && cm.Annotations["helm.sh/hook"] == "" {
				t.Errorf("%s: mounts ConfigMap %s, which does not exist yet when the hook runs on install", name, cm.Name)
			}
		}
	}
}

func hookWeight(t *testing.T, ann map[string]string) int {
	t.Helper()
	w, ok := ann["helm.sh/hook-weight"]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(w)
	if err != nil {
		t.Errorf("hook weight %q: %v", w, err)
	}
	return n
}

func checkServices(t *testing.T, r *rendered) {
	t.Helper()
	bridge := deployment(t, r, "bridge")
	var bridgeSvc *corev1.Service
	for _, svc := range r.Services {
		var target *appsv1.Deployment
		for _, d := range r.Deployments {
			if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				if target != nil {
					t.Errorf("Service %s selects pods of both %s and %s", svc.Name, target.Name, d.Name)
				}
				target = d
			}
		}
		if target == nil {
			t.Errorf("Service %s selects no Deployment", svc.Name)
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.Type == intstr.String && !hasNamedPort(target, p.TargetPort.StrVal) {
				t.Errorf("Service %s: targetPort %q is not a port of %s", svc.Name, p.TargetPort.StrVal, target.Name)
			}
		}
		if target.Name == bridge.Name && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			bridgeSvc = svc
		}
	}
	if bridgeSvc == nil {
		t.Fatal("no Service for the bridge")
	}
	if a := bridgeSvc.Spec.SessionAffinity; a != "" && a != corev1.ServiceAffinityNone {
		t.Errorf("bridge Service %s: sessionAffinity %q; the bridge is stateless and must not pin clients", bridgeSvc.Name, a)
	}
	if bridgeSvc.Spec.SessionAffinityConfig != nil {
		t.Errorf("bridge Service %s: sessionAffinityConfig must be unset", bridgeSvc.Name)
	}
	if servicePort(bridgeSvc, "mcp") != mcpPort {
		t.Errorf("bridge Service %s: port mcp must be %d", bridgeSvc.Name, mcpPort)
	}
}

var affinityAnnotation = regexp.MustCompile(`(?i)(affinity|sticky|session-cookie|hash-by|consistent-hash)`)

func checkIngress(t *testing.T, r *rendered) {
	t.Helper()
	for _, ing := range r.Ingresses {
		for k := range ing.Annotations {
			if affinityAnnotation.MatchString(k) {
				t.Errorf("Ingress %s: annotation %s asks for session affinity; the bridge is stateless", ing.Name, k)
			}
		}
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				t.Errorf("Ingress %s: rule without http paths", ing.Name)
				continue
			}
			for _, p := range rule.HTTP.Paths {
				svc := service(r, p.Backend.Service.Name)
				if svc == nil {
					t.Errorf("Ingress %s: backend Service %s is not rendered", ing.Name, p.Backend.Service.Name)
					continue
				}
				if p.Backend.Service.Port.Name != "mcp" {
					t.Errorf("Ingress %s: backend must be the MCP port, got %+v", ing.Name, p.Backend.Service.Port)
				}
			}
		}
	}
}

// checkNetworkPolicies: every pod is isolated for ingress; a peer from
// outside the release may only reach the bridge (MCP, or BridgeService for
// listed hosts) and the catalog (listed hosts); authz and providers are
// reached only by the kernel (catalog pods).
func checkNetworkPolicies(t *testing.T, r *rendered) {
	t.Helper()
	if len(r.NetworkPolicies) == 0 {
		t.Fatal("no NetworkPolicies rendered")
	}
	catalogPods := labels.Set(deployment(t, r, "catalog").Spec.Template.Labels)
	bridgePods := labels.Set(deployment(t, r, "bridge").Spec.Template.Labels)
	for _, d := range r.Deployments {
		comp := d.Spec.Template.Labels[componentLabel]
		pods := labels.Set(d.Spec.Template.Labels)
		if !selectedByPolicyType(r, pods, "Ingress") {
			t.Errorf("Deployment %s: no Ingress NetworkPolicy selects its pods (they accept any traffic)", d.Name)
		}
		for _, np := range r.NetworkPolicies {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				t.Errorf("NetworkPolicy %s: %v", np.Name, err)
				continue
			}
			if !sel.Matches(pods) {
				continue
			}
			for _, rule := range np.Spec.Ingress {
				ports := rulePorts(rule.Ports)
				for _, external := range externalPeers(rule.From) {
					allowed := comp == "bridge" && onlyPorts(ports, mcpPort, bridgeGRPCPort) ||
						comp == "catalog" && onlyPorts(ports, catalogPort)
					if !allowed {
						t.Errorf("NetworkPolicy %s: %s pods admit %s on %v", np.Name, comp, external, ports)
					}
				}
				if comp == "authz" || comp == "files" {
					for _, p := range rule.From {
						if p.PodSelector == nil || p.NamespaceSelector != nil || p.IPBlock != nil ||
							!selectorOnly(p.PodSelector, catalogPods) {
							t.Errorf("NetworkPolicy %s: %s admits %+v; only the kernel (catalog pods) may call it", np.Name, comp, p)
						}
					}
				}
				if comp == "catalog" {
					for _, p := range rule.From {
						if p.PodSelector != nil && p.NamespaceSelector == nil && !selectorOnly(p.PodSelector, bridgePods) {
							t.Errorf("NetworkPolicy %s: catalog admits release pods other than the bridge: %+v", np.Name, p)
						}
					}
				}
			}
		}
	}
}

func checkPolicies(t *testing.T, r *rendered) {
	t.Helper()
	authz := deployment(t, r, "authz")
	if authz.Spec.Template.Annotations["checksum/policies"] == "" {
		t.Errorf("Deployment %s: no checksum/policies annotation; a policy change would not roll the pods", authz.Name)
	}
	var cmName string
	for _, v := range authz.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	if cmName == "" {
		t.Fatalf("Deployment %s: policies are not mounted from a ConfigMap", authz.Name)
	}
	found := false
	for _, cm := range r.ConfigMaps {
		found = found || cm.Name == cmName
	}
	if !found {
		t.Errorf("Deployment %s mounts ConfigMap %s, which is not rendered", authz.Name, cmName)
	}
	c := container(t, authz, "authz")
	dir := envValue(c, "SHAREDOS_POLICY_DIR")
	mounted := 0
	for _, m := range c.VolumeMounts {
		if m.Name != "policies" {
			continue
		}
		if !m.ReadOnly || dir == "" || !strings.HasPrefix(m.MountPath, dir+"/") {
			t.Errorf("authz: policy mount %s must be read-only and under SHAREDOS_POLICY_DIR %q", m.MountPath, dir)
		}
		mounted++
	}
	if mounted == 0 {
		t.Errorf("authz: no policy file is mounted under SHAREDOS_POLICY_DIR %q", dir)
	}
}

// --- small lookups -------------------------------------------------------

func deployment(t testing.TB, r *rendered, component string) *appsv1.Deployment {
	t.Helper()
	for _, d := range r.Deployments {
		if d.Spec.Template.Labels[componentLabel] == component {
			return d
		}
	}
	t.Fatalf("no Deployment for component %q", component)
	return nil
}

func container(t testing.TB, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	t.Fatalf("Deployment %s has no container %q", d.Name, name)
	return nil
}

func service(r *rendered, name string) *corev1.Service {
	for _, s := range r.Services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func env(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func envValue(c *corev1.Container, name string) string {
	if e := env(c, name); e != nil {
		return e.Value
	}
	return ""
}

func containerPort(c *corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func hasNamedPort(d *appsv1.Deployment, name string) bool {
	for i := range d.Spec.Template.Spec.Containers {
		if containerPort(&d.Spec.Template.Spec.Containers[i], name) != 0 {
			return true
		}
	}
	return false
}

func servicePort(s *corev1.Service, name string) int32 {
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			return p.Port
		}
	}
	return 0
}

// intOrPercent reads an IntOrString as a number; percentages count by their
// number (0% is 0), which is all the checks above need.
func intOrPercent(v *intstr.IntOrString) int {
	if v.Type == intstr.Int {
		return int(v.IntVal)
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil {
		return -1
	}
	return n
}

func selectedByPolicyType(r *rendered, pods map[string]string, policyType string) bool {
	for _, np := range r.NetworkPolicies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(pods)) {
			continue
		}
		for _, pt := range np.Spec.PolicyTypes {
			if string(pt) == policyType {
				return true
			}
		}
	}
	return false
}

// externalPeers describes the peers of a rule that reach from outside the
// release: no peers at all (anyone), another namespace, or an IP block.
func externalPeers(from []networkingv1.NetworkPolicyPeer) []string {
	if len(from) == 0 {
		return []string{"every source"}
	}
	var out []string
	for _, p := range from {
		switch {
		case p.IPBlock != nil:
			out = append(out, "ipBlock "+p.IPBlock.CIDR)
		case p.NamespaceSelector != nil:
			out = append(out, "namespaceSelector "+metav1.FormatLabelSelector(p.NamespaceSelector))
		}
	}
	return out
}

// rulePorts lists the numeric ports of a rule; nil means every port.
func rulePorts(ports []networkingv1.NetworkPolicyPort) []int {
	if len(ports) == 0 {
		return nil
	}
	var out []int
	for _, p := range ports {
		if p.Port == nil || p.Port.Type != intstr.Int || p.EndPort != nil {
			return nil // a named, missing or ranged port: treat as "any"
		}
		out = append(out, int(p.Port.IntVal))
	}
	return out
}

func onlyPorts(ports []int, allowed ...int) bool {
	if ports == nil {
		return false
	}
	for _, p := range ports {
		if !slices.Contains(allowed, p) {
			return false
		}
	}
	return true
}

// selectorOnly reports whether sel selects the pods with labels want (and is
// specific: it names a component).
func selectorOnly(sel *metav1.LabelSelector, want labels.Set) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return false
	}
	_, hasComponent := sel.MatchLabels[componentLabel]
	return hasComponent && s.Matches(want)
}

// Upstream MCP servers (ADR 0019): the allow-lists reach catalog-svc as its
// flags' variables, and each credential is a Secret key as a variable of
// catalog-svc alone — never a value in the chart, never in another pod.
func TestUpstreamSettingsReachOnlyTheKernel(t *testing.T) {
	r := render(t, "--set", "catalog.upstreams.allowHosts={mcp.example.com,git.example.com:8443}",
		"--set", "catalog.upstreams.commands={/usr/local/bin/mcp-fs}",
		"--set", "catalog.upstreams.credentials[0].name=GITHUB_MCP_TOKEN",
		"--set", "catalog.upstreams.credentials[0].secretName=github-mcp",
		"--set", "catalog.upstreams.credentials[0].key=token")
	c := container(t, deployment(t, r, "catalog"), "catalog")
	if got := envValue(c, "SHAREDOS_UPSTREAM_ALLOW_HOSTS"); got != "mcp.example.com,git.example.com:8443" {
		t.Errorf("allow hosts %q", got)
	}
	if got := envValue(c, "SHAREDOS_UPSTREAM_COMMANDS"); got != "/usr/local/bin/mcp-fs" {
		t.Errorf("commands %q", got)
	}
	if e := env(c, "SHAREDOS_UPSTREAM_ALLOW_LINK_LOCAL"); e != nil {
		t.Errorf("link-local allowed by default: %v", e)
	}
	if e := env(c, "SHAREDOS_UPSTREAM_ALLOW_CLEARTEXT_CREDENTIALS"); e != nil {
		t.Errorf("cleartext credentials allowed by default: %v", e)
	}
	if e := env(c, "SHAREDOS_UPSTREAM_DENY_PRIVATE"); e != nil {
		t.Errorf("private addresses denied by default: %v", e)
	}
	// An upstream names only the listed credentials, none without any.
	if got := envValue(c, "SHAREDOS_UPSTREAM_CREDENTIALS"); got != "env:GITHUB_MCP_TOKEN" {
		t.Errorf("upstream credentials %q, want the listed one only", got)
	}
	bare := container(t, deployment(t, render(t), "catalog"), "catalog")
	if got := envValue(bare, "SHAREDOS_UPSTREAM_CREDENTIALS"); got != "none" {
		t.Errorf("upstream credentials %q with none listed, want none", got)
	}
	open := container(t, deployment(t, render(t, "--set", "catalog.upstreams.allowCleartextCredentials=true",
		"--set", "catalog.upstreams.denyPrivate=true"), "catalog"), "catalog")
	if got := envValue(open, "SHAREDOS_UPSTREAM_ALLOW_CLEARTEXT_CREDENTIALS"); got != "true" {
		t.Errorf("allowCleartextCredentials: %q", got)
	}
	if got := envValue(open, "SHAREDOS_UPSTREAM_DENY_PRIVATE"); got != "true" {
		t.Errorf("denyPrivate: %q", got)
	}
	cred := env(c, "GITHUB_MCP_TOKEN")
	if cred == nil || cred.Value != "" || cred.ValueFrom == nil || cred.ValueFrom.SecretKeyRef == nil ||
		cred.ValueFrom.SecretKeyRef.Name != "github-mcp" || cred.ValueFrom.SecretKeyRef.Key != "token" {
		t.Fatalf("credential env %+v", cred)
	}
	for _, comp := range []string{"bridge", "authz", "files"} {
		if e := env(container(t, deployment(t, r, comp), comp), "GITHUB_MCP_TOKEN"); e != nil {
			t.Errorf("%s pods get the upstream credential", comp)
		}
	}
	if _, err := template(t, "--set", "catalog.upstreams.credentials[0].name=bad-name",
		"--set", "catalog.upstreams.credentials[0].secretName=s", "--set", "catalog.upstreams.credentials[0].key=k"); err == nil {
		t.Error("a credential variable name that is not one was accepted")
	}
}

// The host-tenant bindings reach both services that scope a host by them:
// the bridge (which turns it opens, reads and closes) and the kernel (whose
// records it reads), from one value.
func TestHostTenantsReachBridgeAndKernel(t *testing.T) {
	r := render(t, "--set", "bridge.hostTenants={spiffe://sharedos.local/host/h1=acme,spiffe://sharedos.local/host/h2=*}")
	for _, comp := range []string{"bridge", "catalog"} {
		if got := envValue(container(t, deployment(t, r, comp), comp), "SHAREDOS_HOST_TENANTS"); got != "spiffe://sharedos.local/host/h1=acme,spiffe://sharedos.local/host/h2=*" {
			t.Errorf("%s: SHAREDOS_HOST_TENANTS = %q", comp, got)
		}
	}
	for _, comp := range []string{"authz", "files"} {
		if e := env(container(t, deployment(t, r, comp), comp), "SHAREDOS_HOST_TENANTS"); e != nil {
			t.Errorf("%s pods get the host tenants", comp)
		}
	}
	if e := env(container(t, deployment(t, render(t), "catalog"), "catalog"), "SHAREDOS_HOST_TENANTS"); e != nil {
		t.Errorf("host tenants set by default: %v", e)
	}
}

// The gRPC ports serve mutual TLS: no Service port may tell a mesh or a
// gateway that it speaks cleartext HTTP/2.
func TestNoServicePortClaimsCleartextHTTP2(t *testing.T) {
	r := render(t)
	if len(r.Services) == 0 {
		t.Fatal("no Services rendered")
	}
	for _, svc := range r.Services {
		for _, p := range svc.Spec.Ports {
			if p.AppProtocol != nil && *p.AppProtocol == "kubernetes.io/h2c" {
				t.Errorf("%s port %s: appProtocol h2c on a port that serves TLS", svc.Name, p.Name)
			}
		}
	}
}

// With egress locked down, the bridge reaches what bridgeExtra allows (the
// OIDC issuer whose signing keys it reads) besides the kernel and
// PostgreSQL; no other pod gets that rule.
func TestBridgeExtraEgress(t *testing.T) {
	r := render(t, "--set", "networkPolicy.egress.enabled=true",
		"--set", "networkPolicy.egress.postgres.peers[0].ipBlock.cidr=10.20.0.0/24",
		"--set", "bridge.oidc.issuer=https://idp.example.org", "--set", "bridge.oidc.audience=a",
		"--set", "networkPolicy.egress.bridgeExtra[0].to[0].ipBlock.cidr=203.0.113.9/32",
		"--set", "networkPolicy.egress.bridgeExtra[0].ports[0].port=443")
	found := map[string]bool{}
	for _, np := range r.NetworkPolicies {
		for _, e := range np.Spec.Egress {
			for _, p := range e.To {
				if p.IPBlock != nil && p.IPBlock.CIDR == "203.0.113.9/32" {
					found[np.Name] = true
				}
			}
		}
	}
	if len(found) != 1 || !found["toolshare-sharedos-bridge"] {
		t.Errorf("the issuer's egress rule is in %v, want the bridge's policy alone", found)
	}
}

// everyOptionalEnv turns on every values setting that adds a variable to a
// workload's container, so a render shows all the variables the chart can set.
const everyOptionalEnv = `catalog:
  grants:
    retiredSecrets: [old-grant-signer]
  upstreams:
    allowHosts: [mcp.example.com]
    commands: [/usr/local/bin/mcp-fs]
    allowLinkLocal: true
    allowCleartextCredentials: true
    denyPrivate: true
    credentials: [{name: GITHUB_MCP_TOKEN, secretName: github-mcp, key: token}]
bridge:
  allowedOrigins: [https://console.example.com]
  allowedHosts: [tools.example.com]
  trustedProxies: [10.42.0.0/16]
  hostTenants: ["spiffe://sharedos.local/host/h1=acme"]
  oidc: {issuer: https://idp.example.org, audience: toolshare}
  requestState:
    retiredSecrets: [old-request-state]
otel:
  endpoint: https://otel-collector.example.com:4317
  headersSecret: {name: otel-auth, key: headers}
`

// A component's env and secretEnv must not name a variable the chart sets
// for it: Kubernetes keeps the last duplicate, so the entry would silently
// replace a security setting. Every variable the chart can set (every
// optional setting on) is refused, each named in the error, so a template
// that sets a new variable without reserving it in sharedos.reservedEnv
// fails here; a variable the chart leaves alone still passes through.
func TestUserEnvCannotOverrideChartEnv(t *testing.T) {
	all := writeValues(t, everyOptionalEnv)
	r := render(t, "--values", all)
	for _, comp := range []string{"catalog", "authz", "bridge", "files"} {
		var names []string
		for _, e := range container(t, deployment(t, r, comp), comp).Env {
			names = append(names, e.Name)
		}
		t.Run(comp, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			fmt.Fprintf(&b, "%s:\n  env:\n", comp)
			for _, n := range names {
				fmt.Fprintf(&b, "    - {name: %s, value: x}\n", n)
			}
			_, err := template(t, "--values", all, "--values", writeValues(t, b.String()))
			if err == nil {
				t.Fatalf("%s.env may override every variable the chart sets: %v", comp, names)
			}
			for i, n := range names {
				if want := fmt.Sprintf("%s.env[%d] (%s)", comp, i, n); !strings.Contains(err.Error(), want) {
					t.Errorf("%s is set by the chart but not reserved: the error does not name %q", n, want)
				}
			}
		})
	}
	// Precise, not a blanket SHAREDOS_* ban: a service flag the values do
	// not cover is still tuned through env.
	// Nor a blanket OTEL_EXPORTER_OTLP_* one: the exporter's timeout is
	// not where it sends.
	c := container(t, deployment(t, render(t, "--set", "bridge.env[0].name=SHAREDOS_CALL_TIMEOUT",
		"--set", "bridge.env[0].value=5m", "--set", "bridge.env[1].name=OTEL_EXPORTER_OTLP_TIMEOUT",
		"--set-string", "bridge.env[1].value=20000"), "bridge"), "bridge")
	if got := envValue(c, "SHAREDOS_CALL_TIMEOUT"); got != "5m" {
		t.Errorf("bridge.env SHAREDOS_CALL_TIMEOUT = %q, want 5m", got)
	}
	if got := envValue(c, "OTEL_EXPORTER_OTLP_TIMEOUT"); got != "20000" {
		t.Errorf("bridge.env OTEL_EXPORTER_OTLP_TIMEOUT = %q, want 20000", got)
	}
}

// The files provider on a single-attach claim (ReadWriteOnce,
// ReadWriteOncePod) rolls with Recreate: a surge pod could not attach the
// volume the old pod holds (Multi-Attach) and the rollout would hang. An
// emptyDir or a many-attach claim keeps the capacity-preserving rolling
// update.
func TestFilesStrategyFollowsClaimAccessMode(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want appsv1.DeploymentStrategyType
	}{
		{"emptyDir", nil, appsv1.RollingUpdateDeploymentStrategyType},
		{"claim, default access mode", []string{"--set", "files.root.existingClaim=tree"}, appsv1.RecreateDeploymentStrategyType},
		{"ReadWriteOnce", []string{"--set", "files.root.existingClaim=tree", "--set", "files.root.accessMode=ReadWriteOnce"}, appsv1.RecreateDeploymentStrategyType},
		{"ReadWriteOncePod", []string{"--set", "files.root.existingClaim=tree", "--set", "files.root.accessMode=ReadWriteOncePod"}, appsv1.RecreateDeploymentStrategyType},
		{"ReadWriteMany", []string{"--set", "files.root.existingClaim=tree", "--set", "files.root.accessMode=ReadWriteMany", "--set", "files.replicas=2"}, appsv1.RollingUpdateDeploymentStrategyType},
		{"ReadOnlyMany", []string{"--set", "files.root.existingClaim=tree", "--set", "files.root.accessMode=ReadOnlyMany", "--set", "files.root.readOnly=true"}, appsv1.RollingUpdateDeploymentStrategyType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, tc.args...)
			d := deployment(t, r, "files")
			s := d.Spec.Strategy
			if s.Type != tc.want {
				t.Fatalf("files strategy %q, want %q", s.Type, tc.want)
			}
			if s.Type == appsv1.RecreateDeploymentStrategyType && s.RollingUpdate != nil {
				t.Errorf("Recreate with rollingUpdate parameters (the API server rejects them): %+v", s.RollingUpdate)
			}
			checkDeployment(t, r, d)
			for _, comp := range []string{"catalog", "authz", "bridge"} {
				if got := deployment(t, r, comp).Spec.Strategy.Type; got != appsv1.RollingUpdateDeploymentStrategyType {
					t.Errorf("%s strategy %q: only files follows its claim", comp, got)
				}
			}
		})
	}
}

// OTLP headers (an API key, typically) cross only TLS or loopback, unless
// otel.allowCleartextHeaders says the path is trusted; without headers a
// plain collector stays fine. The rejections are in TestValuesRejected.
func TestOTLPHeadersCleartextOptIn(t *testing.T) {
	headers := []string{"--set", "otel.headersSecret.name=otel-auth", "--set", "otel.headersSecret.key=headers"}
	cases := []struct {
		name string
		args []string
	}{
		{"https", append([]string{"--set", "otel.endpoint=https://collector.example.com:4317"}, headers...)},
		{"loopback name", append([]string{"--set", "otel.endpoint=http://localhost:4317"}, headers...)},
		{"loopback v4", append([]string{"--set", "otel.endpoint=http://127.0.0.1:4318", "--set", "otel.protocol=http/protobuf"}, headers...)},
		{"loopback v6", append([]string{"--set", "otel.endpoint=http://[::1]:4317"}, headers...)},
		{"opt-in", append([]string{"--set", "otel.endpoint=http://otel-collector.observability.svc.cluster.local:4317", "--set", "otel.allowCleartextHeaders=true"}, headers...)},
		{"no headers", []string{"--set", "otel.endpoint=http://otel-collector.observability.svc.cluster.local:4317"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := container(t, deployment(t, render(t, tc.args...), "bridge"), "bridge")
			if envValue(c, "OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
				t.Error("the OTLP endpoint is not set")
			}
		})
	}
}

// The bridge serves plain HTTP on its MCP port and has no TLS option of its
// own: a NodePort or LoadBalancer Service renders only with
// bridge.service.allowPlaintextExposure (TLS ends in front of it); ClusterIP
// stays the default. The rejections are in TestValuesRejected.
func TestBridgeExposureNeedsTLSInFront(t *testing.T) {
	bridgeService := func(r *rendered) *corev1.Service {
		t.Helper()
		svc := service(r, deployment(t, r, "bridge").Name)
		if svc == nil {
			t.Fatal("no bridge Service")
		}
		return svc
	}
	if got := bridgeService(render(t)).Spec.Type; got != corev1.ServiceTypeClusterIP {
		t.Errorf("default bridge Service type %q, want ClusterIP", got)
	}
	for _, typ := range []corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort} {
		r := render(t, "--set", "bridge.service.type="+string(typ), "--set", "bridge.service.allowPlaintextExposure=true",
			"--set", "bridge.publicURL=https://tools.example.com")
		if got := bridgeService(r).Spec.Type; got != typ {
			t.Errorf("bridge Service type %q, want %q", got, typ)
		}
	}
	// Harnesses handed the Ingress's https:// address need no publicURL.
	r := render(t, "--set", "bridge.service.type=LoadBalancer", "--set", "bridge.service.allowPlaintextExposure=true",
		"--set", "ingress.enabled=true", "--set", "ingress.host=tools.example.com", "--set", "ingress.tls.secretName=tools-tls",
		"--set", "networkPolicy.mcpFrom[0].podSelector.matchLabels.app=ingress")
	if got := bridgeService(r).Spec.Type; got != corev1.ServiceTypeLoadBalancer {
		t.Errorf("bridge Service type %q behind the Ingress, want LoadBalancer", got)
	}
}

// The release's ServiceAccount carries serviceAccount.annotations (a cloud
// identity, for database authentication) and runs only the workloads that
// use the database: catalog, bridge and the migrate Job (its hook copy).
// authz and files run as ServiceAccounts of their own without annotations,
// so the policy and file pods never hold that identity.
// Every pod's ServiceAccount is rendered; with serviceAccount.create false,
// all run as serviceAccount.name.
func TestCloudIdentityOnlyWhereTheDatabaseIs(t *testing.T) {
	r := render(t, "--set", "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/db")
	accounts := map[string]*corev1.ServiceAccount{}
	for _, sa := range r.ServiceAccounts {
		accounts[sa.Name] = sa
	}
	for _, comp := range []string{"catalog", "bridge", "authz", "files"} {
		pod := deployment(t, r, comp).Spec.Template.Spec
		sa, ok := accounts[pod.ServiceAccountName]
		if !ok {
			t.Errorf("%s runs as ServiceAccount %q, which the chart does not render", comp, pod.ServiceAccountName)
			continue
		}
		_, identity := sa.Annotations["eks.amazonaws.com/role-arn"]
		if wants := comp == "catalog" || comp == "bridge"; identity != wants {
			t.Errorf("%s runs as %s, cloud identity %v; want %v", comp, sa.Name, identity, wants)
		}
	}
	for _, j := range r.Jobs {
		sa := accounts[j.Spec.Template.Spec.ServiceAccountName]
		if sa == nil || sa.Annotations["eks.amazonaws.com/role-arn"] == "" {
			t.Errorf("job %s: ServiceAccount %q without the database identity", j.Name, j.Spec.Template.Spec.ServiceAccountName)
		}
	}
	own := render(t, "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ops-managed")
	if len(own.ServiceAccounts) != 0 {
		t.Errorf("serviceAccount.create=false rendered %d ServiceAccounts", len(own.ServiceAccounts))
	}
	for _, comp := range []string{"catalog", "bridge", "authz", "files"} {
		if got := deployment(t, own, comp).Spec.Template.Spec.ServiceAccountName; got != "ops-managed" {
			t.Errorf("%s runs as %q with serviceAccount.create=false, want ops-managed", comp, got)
		}
	}
}
