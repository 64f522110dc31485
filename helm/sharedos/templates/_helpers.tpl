{{/*
Shared fragments. Every pod in the release is built from these, so the
security context, probes, lifecycle and telemetry wiring cannot drift between
components.
*/}}

{{- define "sharedos.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sharedos.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Component object name; leaves room for the "-headless" suffix within 63. */}}
{{- define "sharedos.componentName" -}}
{{- $base := include "sharedos.fullname" .root | trunc 45 | trimSuffix "-" }}
{{- printf "%s-%s" $base .component }}
{{- end }}

{{- define "sharedos.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades (Deployment selectors are immutable). */}}
{{- define "sharedos.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sharedos.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "sharedos.labels" -}}
helm.sh/chart: {{ include "sharedos.chart" .root }}
{{ include "sharedos.selectorLabels" . }}
app.kubernetes.io/part-of: sharedos
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/* Selects every pod of the release (used by the NetworkPolicies). */}}
{{- define "sharedos.releaseSelector" -}}
app.kubernetes.io/name: {{ include "sharedos.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sharedos.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sharedos.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount a workload runs as: (dict "root" $ "component" c). The
release's one, which carries serviceAccount.annotations (a cloud identity,
e.g. for database authentication), only for the workloads that use the
database (catalog, bridge; the migrate Job has its hook copy); authz and
files, which use none, each get one of their own without annotations. With
serviceAccount.create false every workload runs as serviceAccount.name.
*/}}
{{- define "sharedos.workloadServiceAccountName" -}}
{{- if and .root.Values.serviceAccount.create (has .component (list "authz" "files")) }}
{{- include "sharedos.componentName" . }}
{{- else }}
{{- include "sharedos.serviceAccountName" .root }}
{{- end }}
{{- end }}

{{/* image reference: registry/repository@digest, or :tag (component tag, global tag, appVersion). */}}
{{- define "sharedos.image" -}}
{{- $img := .image }}
{{- $ref := printf "%s/%s" .root.Values.image.registry $img.repository }}
{{- if $img.digest }}
{{- printf "%s@%s" $ref $img.digest }}
{{- else }}
{{- printf "%s:%s" $ref (default (default .root.Chart.AppVersion .root.Values.image.tag) $img.tag) }}
{{- end }}
{{- end }}

{{/* In-cluster gRPC target for a component (headless Service: clients see every pod). */}}
{{- define "sharedos.target" -}}
{{- printf "dns:///%s-headless.%s.svc.%s:%d" (include "sharedos.componentName" (dict "root" .root "component" .component)) .root.Release.Namespace .root.Values.clusterDomain (int .port) }}
{{- end }}

{{- define "sharedos.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "sharedos.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
Pod-level settings shared by every workload: (dict "root" $ "component" c).
Service links are off: with a
release named "sharedos", Kubernetes would otherwise inject variables such as
SHAREDOS_AUTHZ_PORT=tcp://... straight into the services' SHAREDOS_* config
namespace.
*/}}
{{- define "sharedos.podCommon" -}}
serviceAccountName: {{ include "sharedos.workloadServiceAccountName" . | quote }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- include "sharedos.podSecurityContext" .root | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Scheduling knobs of one component: (dict "values" .Values.x) */}}
{{- define "sharedos.scheduling" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Native gRPC probes for a container listening on .port. */}}
{{- define "sharedos.probes" -}}
{{- $p := .root.Values.probes }}
startupProbe:
  grpc:
    port: {{ include "sharedos.healthPort" . }}
    service: {{ $p.livenessService | quote }}
  periodSeconds: {{ $p.startup.periodSeconds }}
  timeoutSeconds: {{ $p.startup.timeoutSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
livenessProbe:
  grpc:
    port: {{ include "sharedos.healthPort" . }}
    service: {{ $p.livenessService | quote }}
  periodSeconds: {{ $p.liveness.periodSeconds }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
readinessProbe:
  grpc:
    port: {{ include "sharedos.healthPort" . }}
  periodSeconds: {{ $p.readiness.periodSeconds }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
lifecycle:
  preStop:
    sleep:
      seconds: {{ .root.Values.lifecycle.preStopSleepSeconds }}
{{- end }}

{{/* Rolling update that never lowers serving capacity. */}}
{{- define "sharedos.strategy" -}}
strategy:
  type: RollingUpdate
  rollingUpdate:
    maxUnavailable: 0
    maxSurge: {{ .Values.rollingUpdate.maxSurge }}
{{- end }}

{{/* OTEL_* for one container: (dict "root" $ "service" "catalog-svc") */}}
{{- define "sharedos.otelEnv" -}}
{{- $o := .root.Values.otel }}
- name: OTEL_SERVICE_NAME
  value: {{ .service | quote }}
- name: K8S_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: K8S_POD_UID
  valueFrom:
    fieldRef:
      fieldPath: metadata.uid
- name: K8S_NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- $attrs := list "service.namespace=sharedos" (printf "service.version=%s" .root.Chart.AppVersion) (printf "service.instance.id=$(K8S_POD_UID)") (printf "k8s.namespace.name=%s" .root.Release.Namespace) "k8s.pod.name=$(K8S_POD_NAME)" "k8s.node.name=$(K8S_NODE_NAME)" }}
{{- with .deployment }}
{{- $attrs = append $attrs (printf "k8s.deployment.name=%s" .) }}
{{- end }}
{{- range $k, $v := $o.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%s" $k $v) }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attrs | quote }}
- name: OTEL_PROPAGATORS
  value: "tracecontext,baggage"
{{- if $o.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $o.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $o.protocol | quote }}
- name: OTEL_TRACES_EXPORTER
  value: "otlp"
- name: OTEL_METRICS_EXPORTER
  value: "otlp"
- name: OTEL_TRACES_SAMPLER
  value: {{ $o.sampler | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $o.samplerArg | quote }}
{{- if $o.headersSecret.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ $o.headersSecret.name | quote }}
      key: {{ $o.headersSecret.key | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* The database URL, always by Secret reference. */}}
{{/*
The PostgreSQL URL of one user of the database: (dict "root" $ "component"
"catalog" | "bridge" | "migrate"). The migrate Job uses the schema owner's
(database.existingSecret); a service uses its own login when
database.<component> names one (ADR 0013), else the owner's, and acts as its
least-privilege role either way (--database-role).
*/}}
{{- define "sharedos.databaseEnv" -}}
{{- $db := .root.Values.database }}
{{- $name := $db.existingSecret }}
{{- $key := $db.key }}
{{- $own := get $db .component }}
{{- if and $own $own.existingSecret }}
{{- $name = $own.existingSecret }}
{{- $key = $own.key }}
{{- end }}
- name: SHAREDOS_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $name | quote }}
      key: {{ $key | quote }}
{{- if and $own $own.maxConns }}
- name: SHAREDOS_DATABASE_MAX_CONNS
  value: {{ $own.maxConns | quote }}
{{- end }}
{{- end }}

{{/*
The variables a workload's own env and secretEnv must not name, as a JSON
list: (dict "root" $ "component" c). Kubernetes keeps the last of duplicate
names, so a user entry would silently replace the chart's setting (a TLS file,
the policy directory, the public URL, the OTLP endpoint, ...). Two kinds:
every variable the chart's templates set for the workload, whatever the values
(a new one must be added here: TestUserEnvCannotOverrideChartEnv renders every
optional setting on and fails on a chart-set variable that is not reserved);
and the few security settings the chart relies on by leaving them at the
services' secure default (mutual TLS, the least-privilege database role, the
bridge's kernel). Every other SHAREDOS_* variable stays settable: it is how a
service flag the values do not cover (e.g. SHAREDOS_CALL_TIMEOUT) is tuned.
*/}}
{{- define "sharedos.reservedEnv" -}}
{{- $common := list "SHAREDOS_LISTEN" "SHAREDOS_HEALTH_LISTEN" "SHAREDOS_TLS_CA" "SHAREDOS_TLS_CERT" "SHAREDOS_TLS_KEY" "SHAREDOS_INSECURE_PLAINTEXT" }}
{{- $otel := list "OTEL_SERVICE_NAME" "OTEL_RESOURCE_ATTRIBUTES" "OTEL_PROPAGATORS" "OTEL_EXPORTER_OTLP_ENDPOINT" "OTEL_EXPORTER_OTLP_PROTOCOL" "OTEL_EXPORTER_OTLP_HEADERS" "OTEL_TRACES_EXPORTER" "OTEL_METRICS_EXPORTER" "OTEL_TRACES_SAMPLER" "OTEL_TRACES_SAMPLER_ARG" "K8S_POD_NAME" "K8S_POD_UID" "K8S_NODE_NAME" }}
{{- $db := list "SHAREDOS_DATABASE_URL" "SHAREDOS_DATABASE_MAX_CONNS" "SHAREDOS_DATABASE_ROLE" }}
{{- $own := dict
  "catalog" (concat $db (list "SHAREDOS_AUTHZ" "SHAREDOS_RECORD_JOURNAL_DIR" "SHAREDOS_GRANT_KEY" "SHAREDOS_GRANT_RETIRED_KEYS" "SHAREDOS_HOST_TENANTS" "SHAREDOS_UPSTREAM_ALLOW_HOSTS" "SHAREDOS_UPSTREAM_COMMANDS" "SHAREDOS_UPSTREAM_ALLOW_LINK_LOCAL" "SHAREDOS_UPSTREAM_ALLOW_CLEARTEXT_CREDENTIALS" "SHAREDOS_UPSTREAM_DENY_PRIVATE" "SHAREDOS_UPSTREAM_CREDENTIALS"))
  "authz" (list "SHAREDOS_POLICY_DIR")
  "bridge" (concat $db (list "SHAREDOS_HTTP_LISTEN" "SHAREDOS_CATALOG" "SHAREDOS_KERNEL" "SHAREDOS_PUBLIC_URL" "SHAREDOS_ALLOWED_ORIGINS" "SHAREDOS_ALLOWED_HOSTS" "SHAREDOS_TRUSTED_PROXIES" "SHAREDOS_HOST_TENANTS" "SHAREDOS_OIDC_ISSUER" "SHAREDOS_OIDC_AUDIENCE" "SHAREDOS_STATE_KEY" "SHAREDOS_STATE_RETIRED_KEYS"))
  "files" (list "SHAREDOS_ROOT") }}
{{- concat $common $otel (index $own .component) | toJson }}
{{- end }}

{{/*
User-supplied env of one component: (dict "root" $ "component" c), from
<component>.env and <component>.secretEnv. Rendering fails, naming every entry,
when one names a reserved variable (sharedos.reservedEnv), where the OTLP
exporter sends and how (OTEL_EXPORTER_OTLP_[signal_]ENDPOINT, _HEADERS,
_INSECURE, _PROTOCOL, the TLS files: one signal's would take the exporter,
and otel.headersSecret's key, elsewhere; _TIMEOUT and _COMPRESSION stay
settable) or, for catalog, an
upstream credential's (catalog.upstreams.credentials, which must not name a
reserved one either).
*/}}
{{- define "sharedos.extraEnv" -}}
{{- $v := index .root.Values .component }}
{{- $reserved := include "sharedos.reservedEnv" . | fromJsonArray }}
{{- $clashes := list }}
{{- if eq .component "catalog" }}
{{- range $i, $e := $v.upstreams.credentials }}
{{- if has $e.name $reserved }}
{{- $clashes = append $clashes (printf "catalog.upstreams.credentials[%d] (%s)" $i $e.name) }}
{{- end }}
{{- end }}
{{- range $v.upstreams.credentials }}
{{- $reserved = append $reserved .name }}
{{- end }}
{{- end }}
{{- range $key := list "env" "secretEnv" }}
{{- range $i, $e := index $v $key }}
{{- if or (has $e.name $reserved) (regexMatch "^OTEL_EXPORTER_OTLP_((TRACES|METRICS|LOGS)_)?(ENDPOINT|HEADERS|INSECURE|CERTIFICATE|CLIENT_KEY|CLIENT_CERTIFICATE|PROTOCOL)$" $e.name) }}
{{- $clashes = append $clashes (printf "%s.%s[%d] (%s)" $.component $key $i $e.name) }}
{{- end }}
{{- end }}
{{- end }}
{{- with $clashes }}
{{- fail (printf "%s: the chart sets these variables for %s (or relies on their secure default), and Kubernetes keeps the last of duplicate names, so such an entry would silently replace the chart's setting: remove it and use the chart's values instead" (join ", " .) $.component) }}
{{- end }}
{{- range $v.env }}
- name: {{ .name }}
  value: {{ .value | quote }}
{{- end }}
{{- range $v.secretEnv }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
{{- end }}
{{- end }}

{{/* A writable /tmp on an otherwise read-only root filesystem. */}}
{{- define "sharedos.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}
{{- define "sharedos.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{/*
Init container that holds a pod until its service's schema is current:
`<binary> migrate --check` exits 0 when every migration of that service is
applied and non-zero otherwise; the kubelet retries a failed init container
with back-off. It runs the pod's own image, so it checks exactly the
migrations that image was built with.
(dict "root" $ "image" .Values.x.image)
*/}}
{{- define "sharedos.waitForMigration" -}}
- name: wait-for-migration
  image: {{ include "sharedos.image" (dict "root" .root "image" .image) }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args: ["migrate", "--check"]
  env:
    {{- include "sharedos.databaseEnv" (dict "root" .root "component" .component) | nindent 4 }}
  resources:
    {{- toYaml .root.Values.migrate.resources | nindent 4 }}
  securityContext:
    {{- include "sharedos.containerSecurityContext" .root | nindent 4 }}
  volumeMounts:
    {{- include "sharedos.tmpVolumeMount" .root | nindent 4 }}
{{- end }}

{{/*
Cross-field rules the JSON schema cannot express. Called from every workload
template so a bad combination fails at render time with the field named.
*/}}
{{- define "sharedos.validate" -}}
{{- range $c := list "catalog" "authz" "bridge" "files" }}
{{- $v := index $.Values $c }}
{{- if or (ne $c "files") $v.enabled }}
{{- $min := int $v.replicas }}
{{- if and (hasKey $v "hpa") $v.hpa.enabled }}
{{- if gt (int $v.hpa.minReplicas) (int $v.hpa.maxReplicas) }}
{{- fail (printf "%s.hpa.minReplicas (%d) must not exceed %s.hpa.maxReplicas (%d)" $c (int $v.hpa.minReplicas) $c (int $v.hpa.maxReplicas)) }}
{{- end }}
{{- $min = int $v.hpa.minReplicas }}
{{- end }}
{{- if and (hasKey $v.pdb "minAvailable") (ge (int $v.pdb.minAvailable) $min) }}
{{- fail (printf "%s.pdb.minAvailable (%d) must be below the replica count (%d): otherwise no pod may ever be evicted and node drains hang" $c (int $v.pdb.minAvailable) $min) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not .Values.tls.certManager.enabled }}
{{- range $c := list "catalog" "authz" "bridge" "files" }}
{{- if and (or (ne $c "files") $.Values.files.enabled) (not (index $.Values.tls.existingSecrets $c)) }}
{{- fail (printf "tls.existingSecrets.%s is required when tls.certManager.enabled is false: the internal plane runs mutual TLS" $c) }}
{{- end }}
{{- end }}
{{- end }}
{{- $db := .Values.database }}
{{- $surge := 0 }}
{{- if kindIs "float64" .Values.rollingUpdate.maxSurge }}{{ $surge = int .Values.rollingUpdate.maxSurge }}{{ else }}{{ $surge = 1 }}{{ end }}
{{- $bridgePods := int .Values.bridge.replicas }}
{{- if .Values.bridge.hpa.enabled }}{{ $bridgePods = int .Values.bridge.hpa.maxReplicas }}{{ end }}
{{- $need := add (mul (add $bridgePods $surge) (int $db.bridge.maxConns)) (mul (add (int .Values.catalog.replicas) $surge) (add (int $db.catalog.maxConns) 2)) }}
{{- $pg := .Values.postgres }}
{{- $have := sub (int $pg.maxConnections) (int $pg.reservedConnections) }}
{{- if gt (int $need) (int $have) }}
{{- fail (printf "database connection budget exceeded: bridge %d pods × %d + catalog %d pods × (%d + 2 LISTEN) = %d connections at maximum scale (surge included), but postgres.maxConnections %d − postgres.reservedConnections %d leaves %d; lower database.*.maxConns or the replica ceilings, or raise max_connections (and postgres.maxConnections)" (add $bridgePods $surge) (int $db.bridge.maxConns) (add (int .Values.catalog.replicas) $surge) (int $db.catalog.maxConns) (int $need) (int $pg.maxConnections) (int $pg.reservedConnections) (int $have)) }}
{{- end }}
{{- if and (not .Values.tls.certManager.enabled) (not .Values.catalog.grants.existingSecret) }}
{{- fail "catalog.grants.existingSecret is required when tls.certManager.enabled is false: every kernel replica signs turn grants with the same key" }}
{{- end }}
{{- if and (not .Values.tls.certManager.enabled) (not .Values.bridge.requestState.existingSecret) }}
{{- fail "bridge.requestState.existingSecret is required when tls.certManager.enabled is false: every bridge pod seals input-required states with the same key" }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.ingress.host) }}
{{- fail "ingress.host is required when ingress.enabled is true" }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.ingress.tls.secretName) (not (hasPrefix "https://" (lower .Values.bridge.publicURL))) }}
{{- fail "ingress.tls.secretName is required when ingress.enabled is true: turn tokens must not cross the network in cleartext (when TLS ends before the Ingress, set bridge.publicURL to its https:// address)" }}
{{- end }}
{{- if and .Values.ingress.enabled (hasPrefix "*" .Values.ingress.host) (not .Values.bridge.publicURL) }}
{{- fail (printf "ingress.host %s is a wildcard, which no harness can connect to: set bridge.publicURL to the concrete https:// address turns are handed" .Values.ingress.host) }}
{{- end }}
{{- if le (int .Values.lifecycle.terminationGracePeriodSeconds) (int .Values.lifecycle.preStopSleepSeconds) }}
{{- fail (printf "lifecycle.terminationGracePeriodSeconds (%d) must exceed lifecycle.preStopSleepSeconds (%d): the grace period also has to cover draining in-flight calls" (int .Values.lifecycle.terminationGracePeriodSeconds) (int .Values.lifecycle.preStopSleepSeconds)) }}
{{- end }}
{{- if and .Values.otel.headersSecret.name (not .Values.otel.headersSecret.key) }}
{{- fail "otel.headersSecret.key is required when otel.headersSecret.name is set" }}
{{- end }}
{{- $o := .Values.otel }}
{{- if and $o.endpoint $o.headersSecret.name (not $o.allowCleartextHeaders) }}
{{- $u := urlParse $o.endpoint }}
{{- if and (eq (lower $u.scheme) "http") (not (include "sharedos.isLoopback" $u.hostname)) }}
{{- fail (printf "otel.headersSecret would send OTEL_EXPORTER_OTLP_HEADERS (typically an API key) to %s in cleartext: use an https:// otel.endpoint or a collector on loopback, or set otel.allowCleartextHeaders: true if the path to the collector is trusted" $o.endpoint) }}
{{- end }}
{{- end }}
{{- $svc := .Values.bridge.service }}
{{- if and (ne $svc.type "ClusterIP") (not $svc.allowPlaintextExposure) }}
{{- fail (printf "bridge.service.type %s exposes the bridge outside the cluster, and its MCP port (7480) serves plain HTTP (the bridge has no TLS of its own): turn bearer tokens would cross in cleartext. End TLS in front of it (a TLS-terminating load balancer, or the Ingress with ingress.tls.secretName and a ClusterIP Service) and set bridge.service.allowPlaintextExposure: true to confirm that TLS ends in front of it" $svc.type) }}
{{- end }}
{{- if and (ne $svc.type "ClusterIP") (not (hasPrefix "https://" (lower (include "sharedos.publicURL" .)))) }}
{{- fail (printf "bridge.service.type %s needs an https:// address for harnesses: bridge.publicURL, where TLS ends in front of the bridge, or the Ingress with TLS (they are handed %s, which reaches nothing outside the cluster or carries turn tokens in cleartext)" $svc.type (include "sharedos.publicURL" .)) }}
{{- end }}
{{- $f := .Values.files }}
{{- if and $f.enabled (gt (int $f.replicas) 1) $f.root.existingClaim (eq (default "ReadWriteOnce" $f.root.accessMode) "ReadWriteOncePod") }}
{{- fail "files.replicas above 1 with a ReadWriteOncePod claim (files.root.accessMode): only one pod can ever mount it; use a ReadWriteMany claim or one replica" }}
{{- end }}
{{- end }}

{{/* "true" when a URL's hostname is a loopback address (localhost, 127.0.0.0/8, ::1), else empty. */}}
{{- define "sharedos.isLoopback" -}}
{{- $h := lower . }}
{{- if or (eq $h "localhost") (regexMatch "^127\\.[0-9]+\\.[0-9]+\\.[0-9]+$" $h) (eq $h "::1") }}true{{ end }}
{{- end }}

{{/* Base URL the bridge puts in front of /turns/{turnId}/mcp. */}}
{{- define "sharedos.publicURL" -}}
{{- if .Values.bridge.publicURL }}
{{- .Values.bridge.publicURL | trimSuffix "/" }}
{{- else if .Values.ingress.enabled }}
{{- printf "%s://%s" (ternary "https" "http" (ne .Values.ingress.tls.secretName "")) .Values.ingress.host }}
{{- else }}
{{- printf "http://%s.%s.svc.%s:7480" (include "sharedos.componentName" (dict "root" . "component" "bridge")) .Release.Namespace .Values.clusterDomain }}
{{- end }}
{{- end }}

{{/*
Policy files authz loads: the chart's policies/ tree (a copy of
deploy/policies; Rego tests excluded) overlaid with authz.policies from the
values. Returns JSON (exact bytes; a YAML round trip can drop a final newline): relative path -> content.
*/}}
{{- define "sharedos.policyFiles" -}}
{{- $files := dict }}
{{- range $path, $_ := .Files.Glob "policies/**" }}
{{- $rel := trimPrefix "policies/" $path }}
{{- $base := base $rel }}
{{- $served := or (hasSuffix ".rego" $base) (hasSuffix ".json" $base) (hasSuffix ".yaml" $base) (hasSuffix ".yml" $base) }}
{{- if and $served (not (hasSuffix "_test.rego" $base)) (not (hasPrefix "." $base)) }}
{{- $_ := set $files $rel ($.Files.Get $path) }}
{{- end }}
{{- end }}
{{- range $rel, $body := .Values.authz.policies }}
{{- $_ := set $files $rel $body }}
{{- end }}
{{- if not $files }}
{{- fail "authz has no policies: the chart's policies/ directory is empty (run `make helm-policies`) and authz.policies is empty" }}
{{- end }}
{{- toJson $files }}
{{- end }}

{{/* ConfigMap key of a policy path (keys cannot hold "/"). */}}
{{- define "sharedos.policyKey" -}}
{{- . | replace "/" "__" }}
{{- end }}

{{/* Egress rule to PostgreSQL (networkPolicy.egress.postgres). */}}
{{- define "sharedos.postgresEgress" -}}
{{- $pg := .Values.networkPolicy.egress.postgres }}
- to:
    {{- toYaml $pg.peers | nindent 4 }}
  ports:
    - protocol: TCP
      port: {{ $pg.port }}
{{- end }}

{{/* One `<service> migrate` step of the migrate Job: (dict "root" $ "name" n "image" img "service" s) */}}
{{- define "sharedos.migrateContainer" -}}
- name: {{ .name }}
  image: {{ include "sharedos.image" (dict "root" .root "image" .image) }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args: ["migrate"]
  env:
    {{- include "sharedos.databaseEnv" (dict "root" .root "component" "migrate") | nindent 4 }}
    {{- include "sharedos.otelEnv" (dict "root" .root "service" (printf "%s-migrate" .service)) | nindent 4 }}
  resources:
    {{- toYaml .root.Values.migrate.resources | nindent 4 }}
  securityContext:
    {{- include "sharedos.containerSecurityContext" .root | nindent 4 }}
  volumeMounts:
    {{- include "sharedos.tmpVolumeMount" .root | nindent 4 }}
{{- end }}

{{/*
Mutual TLS of the internal plane (ADR 0012). The kubelet's gRPC probes speak
no TLS: every service also serves health alone, in plaintext, on this port.
*/}}
{{- define "sharedos.healthPort" -}}7410{{- end }}

{{/* The SPIFFE role of a component's identity: (dict "component" c) */}}
{{- define "sharedos.tlsRole" -}}
{{- index (dict "catalog" "catalog" "authz" "authz" "bridge" "bridge" "files" "provider") .component }}
{{- end }}

{{/* A component's SPIFFE ID: (dict "root" $ "component" c) */}}
{{- define "sharedos.spiffeID" -}}
{{- printf "spiffe://%s/%s/%s" .root.Values.tls.trustDomain (include "sharedos.tlsRole" .) (include "sharedos.componentName" .) }}
{{- end }}

{{/* The Secret holding a component's tls.crt, tls.key, ca.crt: (dict "root" $ "component" c) */}}
{{- define "sharedos.tlsSecret" -}}
{{- if .root.Values.tls.certManager.enabled }}
{{- printf "%s-tls" (include "sharedos.componentName" .) }}
{{- else }}
{{- index .root.Values.tls.existingSecrets .component }}
{{- end }}
{{- end }}

{{- define "sharedos.tlsEnv" -}}
- name: SHAREDOS_TLS_CA
  value: /etc/sharedos/tls/ca.crt
- name: SHAREDOS_TLS_CERT
  value: /etc/sharedos/tls/tls.crt
- name: SHAREDOS_TLS_KEY
  value: /etc/sharedos/tls/tls.key
- name: SHAREDOS_HEALTH_LISTEN
  value: ":{{ include "sharedos.healthPort" . }}"
{{- end }}

{{- define "sharedos.healthContainerPort" -}}
- name: health
  containerPort: {{ include "sharedos.healthPort" . }}
  protocol: TCP
{{- end }}

{{- define "sharedos.tlsVolumeMount" -}}
- name: tls
  mountPath: /etc/sharedos/tls
  readOnly: true
{{- end }}

{{/* (dict "root" $ "component" c); the key is readable by the pod's fsGroup only. */}}
{{/*
The Secret holding the kernel's turn-grant signing key (tls.key): the
operator's, or the one the chart's grant-signer Certificate writes.
*/}}
{{- define "sharedos.grantSecret" -}}
{{- .Values.catalog.grants.existingSecret | default (printf "%s-grant-signer" (include "sharedos.fullname" .)) }}
{{- end }}

{{/*
The Secret holding the bridge's request-state sealing key (tls.key, ADR 0017):
the operator's, or the one the chart's request-state Certificate writes.
*/}}
{{- define "sharedos.stateSecret" -}}
{{- .Values.bridge.requestState.existingSecret | default (printf "%s-request-state" (include "sharedos.fullname" .)) }}
{{- end }}

{{- define "sharedos.tlsVolume" -}}
- name: tls
  secret:
    secretName: {{ include "sharedos.tlsSecret" . | quote }}
    defaultMode: 0440
{{- end }}
