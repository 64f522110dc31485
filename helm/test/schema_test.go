package charttest

import (
	"path/filepath"
	"strings"
	"testing"
)

// schemaError is how helm reports a values.schema.json violation.
const schemaError = "values don't meet the specifications of the schema"

func TestSchemaRejectsInvalidValuesFile(t *testing.T) {
	_, err := template(t, "--values", filepath.Join("testdata", "invalid-values.yaml"))
	if err == nil {
		t.Fatal("helm template accepted testdata/invalid-values.yaml")
	}
	for _, want := range []string{schemaError, "/database", "url", "/bridge/replicas"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

// TestValuesRejected covers one rule per case, each with the words the
// operator needs to find the field: the schema for shapes, the templates for
// rules across fields.
func TestValuesRejected(t *testing.T) {
	cases := []struct {
		name   string
		values string
		want   []string
	}{
		{"unknown top-level key", "replica: 3\n", []string{schemaError, "replica"}},
		{"inline database URL", "database:\n  existingSecret: db\n  key: url\n  url: postgres://u:p@h/db\n", []string{schemaError, "/database"}},
		{"empty secret reference", "database:\n  existingSecret: \"\"\n", []string{schemaError, "/database/existingSecret"}},
		{"latest tag", "image:\n  tag: latest\n", []string{schemaError, "/image/tag"}},
		{"latest tag in capitals", "image:\n  tag: LATEST\n", []string{schemaError, "/image/tag"}},
		{"PDB that protects nothing", "catalog:\n  pdb:\n    minAvailable: 0\n", []string{schemaError, "/catalog/pdb"}},
		{"bad digest", "bridge:\n  image:\n    digest: sha256:abc\n", []string{schemaError, "/bridge/image/digest"}},
		{"memory limit missing", "catalog:\n  resources:\n    limits: null\n", []string{schemaError, "/catalog/resources"}},
		{"bad quantity", "authz:\n  resources:\n    requests:\n      cpu: lots\n", []string{schemaError, "/authz/resources/requests/cpu"}},
		{"both PDB fields", "bridge:\n  pdb:\n    maxUnavailable: 1\n", []string{schemaError, "/bridge/pdb"}},
		{"sticky Ingress", "ingress:\n  annotations:\n    nginx.ingress.kubernetes.io/affinity: cookie\n", []string{schemaError, "/ingress/annotations/nginx.ingress.kubernetes.io~1affinity"}},
		{"sticky Service", "bridge:\n  service:\n    annotations:\n      traefik.ingress.kubernetes.io/service.sticky.cookie: \"true\"\n", []string{schemaError, "/bridge/service/annotations/traefik.ingress.kubernetes.io~1service.sticky.cookie"}},
		{"otel protocol", "otel:\n  protocol: udp\n", []string{schemaError, "/otel/protocol"}},
		{"zero replicas", "catalog:\n  replicas: 0\n", []string{schemaError, "/catalog/replicas"}},
		{"policy path escapes the directory", "authz:\n  policies:\n    ../etc/passwd.rego: x\n", []string{schemaError, "/authz/policies", "../etc/passwd.rego"}},
		{"policy file type", "authz:\n  policies:\n    notes.txt: x\n", []string{schemaError, "/authz/policies", "notes.txt"}},
		{"plain env without value", "bridge:\n  env:\n    - name: X\n", []string{schemaError, "/bridge/env/0"}},
		{"origin with a path", "bridge:\n  allowedOrigins: [\"https://a.example.com/x\"]\n", []string{schemaError, "/bridge/allowedOrigins/0"}},
		// Rules across fields, enforced by the templates.
		{"hpa range", "bridge:\n  hpa:\n    minReplicas: 5\n    maxReplicas: 3\n", []string{"bridge.hpa.minReplicas (5) must not exceed bridge.hpa.maxReplicas (3)"}},
		{"pdb blocks drains", "catalog:\n  replicas: 1\n", []string{"catalog.pdb.minAvailable (1) must be below the replica count (1)"}},
		{"ingress without host", "ingress:\n  enabled: true\nnetworkPolicy:\n  mcpFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]\n", []string{"ingress.host is required"}},
		{"ingress without TLS", "ingress:\n  enabled: true\n  host: tools.example.com\nnetworkPolicy:\n  mcpFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]\n", []string{"ingress.tls.secretName is required"}},
		{"ingress without TLS and a cleartext publicURL", "ingress:\n  enabled: true\n  host: tools.example.com\nbridge:\n  publicURL: http://tools.example.com\nnetworkPolicy:\n  mcpFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]\n", []string{"ingress.tls.secretName is required"}},
		{"wildcard ingress host as the turns' address", "ingress:\n  enabled: true\n  host: \"*.example.com\"\n  tls:\n    secretName: t\nnetworkPolicy:\n  mcpFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]\n", []string{"is a wildcard"}},
		{"ingress open around itself", "ingress:\n  enabled: true\n  host: tools.example.com\n  tls:\n    secretName: t\n", []string{"networkPolicy.mcpFrom must name the Ingress controller's pods"}},
		{"grace period too short", "lifecycle:\n  preStopSleepSeconds: 30\n  terminationGracePeriodSeconds: 20\n", []string{"lifecycle.terminationGracePeriodSeconds (20) must exceed lifecycle.preStopSleepSeconds (30)"}},
		{"egress without postgres", "networkPolicy:\n  egress:\n    enabled: true\n", []string{"networkPolicy.egress.postgres.peers must list"}},
		{"egress without the OIDC issuer", "bridge:\n  oidc:\n    issuer: https://idp.example.org\n    audience: a\nnetworkPolicy:\n  egress:\n    enabled: true\n    postgres:\n      peers: [{ipBlock: {cidr: 10.0.0.0/24}}]\n",
			[]string{"networkPolicy.egress.bridgeExtra must allow the OIDC issuer"}},
		{"otel headers without key", "otel:\n  headersSecret:\n    name: s\n", []string{"otel.headersSecret.key is required"}},
		// A user env entry that names a variable the chart sets would win
		// silently (Kubernetes keeps the last duplicate).
		{"env overrides a chart setting", "catalog:\n  env:\n    - {name: SHAREDOS_AUTHZ, value: \"dns:///elsewhere:7402\"}\n",
			[]string{"catalog.env[0] (SHAREDOS_AUTHZ)", "the chart sets these variables for catalog", "Kubernetes keeps the last of duplicate names"}},
		{"env redirects the OTLP exporter", "catalog:\n  env:\n    - {name: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, value: \"http://collector.example:4317\"}\n",
			[]string{"catalog.env[0] (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)"}},
		{"secretEnv overrides the OTLP headers", "bridge:\n  secretEnv:\n    - {name: OTEL_EXPORTER_OTLP_HEADERS, secretName: s, key: k}\n",
			[]string{"bridge.secretEnv[0] (OTEL_EXPORTER_OTLP_HEADERS)", "for bridge"}},
		{"env turns mutual TLS off", "authz:\n  env:\n    - {name: GOMAXPROCS, value: \"2\"}\n    - {name: SHAREDOS_INSECURE_PLAINTEXT, value: \"true\"}\n",
			[]string{"authz.env[1] (SHAREDOS_INSECURE_PLAINTEXT)"}},
		{"env drops the database role", "bridge:\n  env:\n    - {name: SHAREDOS_DATABASE_ROLE, value: \"\"}\n", []string{"bridge.env[0] (SHAREDOS_DATABASE_ROLE)"}},
		{"env moves the files root", "files:\n  env:\n    - {name: SHAREDOS_ROOT, value: /}\n", []string{"files.env[0] (SHAREDOS_ROOT)"}},
		{"env shadows an upstream credential", "catalog:\n  upstreams:\n    credentials: [{name: GITHUB_MCP_TOKEN, secretName: g, key: t}]\n  secretEnv:\n    - {name: GITHUB_MCP_TOKEN, secretName: other, key: t}\n",
			[]string{"catalog.secretEnv[0] (GITHUB_MCP_TOKEN)"}},
		{"credential named where catalog-svc never resolves one", "catalog:\n  upstreams:\n    credentials: [{name: PGPASSWORD, secretName: g, key: t}]\n",
			[]string{"/catalog/upstreams/credentials/0/name"}},
		{"credential named like a chart setting", "catalog:\n  upstreams:\n    credentials: [{name: SHAREDOS_GRANT_KEY, secretName: g, key: t}]\n",
			[]string{"/catalog/upstreams/credentials/0/name"}},
		// OTLP headers (an API key, typically) only over TLS or to loopback.
		{"otel headers in cleartext", "otel:\n  endpoint: http://otel-collector.observability.svc.cluster.local:4317\n  headersSecret: {name: otel-auth, key: headers}\n",
			[]string{"otel.headersSecret would send OTEL_EXPORTER_OTLP_HEADERS", "to http://otel-collector.observability.svc.cluster.local:4317 in cleartext", "otel.allowCleartextHeaders: true"}},
		{"otel headers to a name that starts like loopback", "otel:\n  endpoint: http://127.0.0.1.nip.example:4317\n  headersSecret: {name: otel-auth, key: headers}\n",
			[]string{"otel.allowCleartextHeaders"}},
		// The bridge has no TLS of its own: exposing its plain-HTTP MCP port
		// off-cluster needs TLS in front of it, confirmed.
		{"bridge LoadBalancer without TLS in front", "bridge:\n  service:\n    type: LoadBalancer\n",
			[]string{"bridge.service.type LoadBalancer exposes the bridge outside the cluster", "plain HTTP", "bridge.service.allowPlaintextExposure: true"}},
		{"bridge NodePort without TLS in front", "bridge:\n  service:\n    type: NodePort\n", []string{"bridge.service.type NodePort", "bridge.service.allowPlaintextExposure"}},
		{"bridge LoadBalancer without its https address", "bridge:\n  service:\n    type: LoadBalancer\n    allowPlaintextExposure: true\n",
			[]string{"bridge.service.type LoadBalancer needs an https:// address for harnesses", "they are handed http://"}},
		{"bridge NodePort with an http address", "bridge:\n  publicURL: http://tools.example.com\n  service:\n    type: NodePort\n    allowPlaintextExposure: true\n",
			[]string{"bridge.service.type NodePort needs an https:// address", "they are handed http://tools.example.com"}},
		{"files replicas on a single-pod claim", "files:\n  replicas: 2\n  root:\n    existingClaim: files-data\n    accessMode: ReadWriteOncePod\n",
			[]string{"files.replicas above 1 with a ReadWriteOncePod claim"}},
		{"release ServiceAccount named like a component's", "serviceAccount:\n  name: " + releaseName + "-sharedos-authz\n",
			[]string{"serviceAccount.name \"" + releaseName + "-sharedos-authz\" is the name of the authz ServiceAccount the chart creates"}},
		// Two Certificates of one name: the later would overwrite the
		// workload's Secret with a client's certificate of another role.
		{"client identity named like a workload", "tls:\n  certManager:\n    clientIdentities: [{name: catalog, role: operator}]\n",
			[]string{"tls.certManager.clientIdentities: name \"catalog\" makes the Certificate and Secret " + releaseName + "-sharedos-catalog-tls"}},
		{"two client identities of one name", "tls:\n  certManager:\n    clientIdentities: [{name: ops, role: operator}, {name: ops, role: host}]\n",
			[]string{"name \"ops\" makes the Certificate and Secret " + releaseName + "-sharedos-ops-tls"}},
		{"release ServiceAccount named like the migrate hook's", "serviceAccount:\n  name: " + releaseName + "-sharedos-migrate\n",
			[]string{"the migrate ServiceAccount"}},
		{"files claim access mode", "files:\n  root:\n    existingClaim: c\n    accessMode: RWO\n", []string{schemaError, "/files/root/accessMode"}},
		{"mTLS without certificates", "tls:\n  certManager:\n    enabled: false\n", []string{"tls.existingSecrets.catalog is required when tls.certManager.enabled is false"}},
		{"grants without a key", "tls:\n  certManager:\n    enabled: false\n  existingSecrets: {catalog: c, authz: a, bridge: b, files: f}\n",
			[]string{"catalog.grants.existingSecret is required when tls.certManager.enabled is false"}},
		{"request states without a key", "tls:\n  certManager:\n    enabled: false\n  existingSecrets: {catalog: c, authz: a, bridge: b, files: f}\ncatalog:\n  grants:\n    existingSecret: g\n",
			[]string{"bridge.requestState.existingSecret is required when tls.certManager.enabled is false"}},
		// Issue 17, item 14: the default install's ceilings (bridge HPA 10, pool 10,
		// as before) need more connections than PostgreSQL's default 100.
		{"connection budget", "database:\n  bridge:\n    maxConns: 10\n", []string{"database connection budget exceeded", "= 146 connections", "leaves 90"}},
		{"connection budget of a smaller server", "postgres:\n  maxConnections: 50\n  reservedConnections: 10\n", []string{"database connection budget exceeded", "leaves 40"}},
		{"grant secret name", "catalog:\n  grants:\n    retiredSecrets: [\"Not_A_Name\"]\n", []string{schemaError, "/catalog/grants/retiredSecrets/0"}},
		{"request-state secret name", "bridge:\n  requestState:\n    retiredSecrets: [\"Not_A_Name\"]\n", []string{schemaError, "/bridge/requestState/retiredSecrets/0"}},
		{"client identity of a service role", "tls:\n  certManager:\n    clientIdentities: [{name: x, role: bridge}]\n", []string{schemaError, "/tls/certManager/clientIdentities/0/role"}},
		// Names rendered into manifests are Kubernetes names: a line break
		// in one would have rendered YAML of its own (a defaultBackend).
		{"ingress TLS secret with YAML in it", "ingress:\n  tls:\n    secretName: \"tls\\n  defaultBackend: x\"\n", []string{schemaError, "/ingress/tls/secretName"}},
		{"ingress class", "ingress:\n  className: \"a b\"\n", []string{schemaError, "/ingress/className"}},
		{"files claim", "files:\n  root:\n    existingClaim: \"c\\nx: y\"\n", []string{schemaError, "/files/root/existingClaim"}},
		{"otel headers secret", "otel:\n  headersSecret:\n    name: \"S\"\n    key: k\n", []string{schemaError, "/otel/headersSecret/name"}},
		{"otel headers key", "otel:\n  headersSecret:\n    name: s\n    key: \"k: v\"\n", []string{schemaError, "/otel/headersSecret/key"}},
		{"TLS secret", "tls:\n  existingSecrets:\n    bridge: \"b\\n\"\n", []string{schemaError, "/tls/existingSecrets/bridge"}},
		{"issuer", "tls:\n  certManager:\n    issuerRef:\n      name: \"i: j\"\n", []string{schemaError, "/tls/certManager/issuerRef/name"}},
		{"service account", "serviceAccount:\n  name: \"sa\\nx\"\n", []string{schemaError, "/serviceAccount/name"}},
		{"name override", "nameOverride: \"A_B\"\n", []string{schemaError, "/nameOverride"}},
		{"fullname override", "fullnameOverride: \"x.y\"\n", []string{schemaError, "/fullnameOverride"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "--values", writeValues(t, tc.values))
			if err == nil {
				t.Fatalf("helm template accepted:\n%s", tc.values)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
		})
	}
}
