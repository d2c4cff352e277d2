{{/* Names: <release>-robustrl-<part>, cut to Kubernetes' 63 characters. */}}
{{- define "robustrl.fullname" -}}
{{- printf "%s-robustrl" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "robustrl.name" -}}
{{- printf "%s-robustrl-%s" .root.Release.Name .part | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "robustrl.labels" -}}
app.kubernetes.io/name: robustrl
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .part }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}
{{- define "robustrl.selector" -}}
app.kubernetes.io/name: robustrl
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .part }}
{{- end -}}

{{- define "robustrl.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{- define "robustrl.secretName" -}}
{{- default (printf "%s-secrets" (include "robustrl.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The control-plane services by values key: their process name in the image. */}}
{{- define "robustrl.services" -}}
detector: detector
controller: controller
requestManager: request-manager
rolloutManager: rollout-manager
weightRegistry: weight-registry
{{- end -}}

{{- define "robustrl.kafkaBrokers" -}}
{{- if .Values.kafka.bundled -}}
{{- printf "%s:9092" (include "robustrl.name" (dict "root" . "part" "kafka")) -}}
{{- else -}}
{{- required "kafka.brokers is required (host:port,… of your Kafka), or set kafka.bundled=true" .Values.kafka.brokers -}}
{{- end -}}
{{- end -}}

{{/*
Configuration checked when the chart renders, with the value to fix in the message (values.schema.json
checks the types): what would otherwise surface as a pod failing at start.
*/}}
{{- define "robustrl.validate" -}}
{{- if not .Values.secrets.existingSecret -}}
{{- if lt (len .Values.secrets.identitySecret) 32 -}}
{{- fail "secrets.identitySecret must have at least 32 characters (or name secrets.existingSecret): it signs every record (README \"Who speaks on the bus\")" -}}
{{- end -}}
{{- if and .Values.secrets.controllerCommandSecret (lt (len .Values.secrets.controllerCommandSecret) 32) -}}
{{- fail "secrets.controllerCommandSecret must have at least 32 characters" -}}
{{- end -}}
{{- if not .Values.secrets.httpTokens -}}
{{- fail "secrets.httpTokens must list at least one bearer token (or name secrets.existingSecret): the services' APIs listen on the pod network" -}}
{{- end -}}
{{- range .Values.secrets.httpTokens -}}
{{- if lt (len .) 16 -}}
{{- fail "every token in secrets.httpTokens must have at least 16 characters" -}}
{{- end -}}
{{- end -}}
{{- if and (not .Values.postgresql.bundled) (not .Values.secrets.databaseUrl) -}}
{{- fail "secrets.databaseUrl (postgres://…) is required, or set postgresql.bundled=true" -}}
{{- end -}}
{{- if and .Values.postgresql.bundled (lt (len .Values.secrets.postgresPassword) 12) -}}
{{- fail "secrets.postgresPassword must have at least 12 characters with postgresql.bundled=true" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.agent.enabled (not .Values.agent.jobId) -}}
{{- fail "agent.jobId is required with agent.enabled: the job this pool of GPU nodes works for" -}}
{{- end -}}
{{- if ne (empty .Values.agent.machineKeyHostPath) (empty .Values.agent.controllerPublicKey) -}}
{{- fail "agent.machineKeyHostPath and agent.controllerPublicKey go together: the agent signs with the one and checks commands with the other" -}}
{{- end -}}
{{- if and .Values.agent.enabled (not .Values.agent.machineKeyHostPath) -}}
{{- fail "agent.machineKeyHostPath and agent.controllerPublicKey are required with agent.enabled: the services check every record's signature, so an agent without its key would have every record dead-lettered as unsigned. On each GPU node write `robustrl identity machine-key <node name>` to that path; set agent.controllerPublicKey to `robustrl identity controller-public-key` (README: Deploying with Helm)" -}}
{{- end -}}
{{- if and .Values.agent.enabled (not .Values.agent.controlPlanePublicKey) -}}
{{- fail "agent.controlPlanePublicKey is required with agent.enabled: without it an agent acts on a retirement, release or probe any other agent wrote. Set it to `robustrl identity control-plane-public-key`" -}}
{{- end -}}
{{- if .Values.agent.enabled -}}
{{- range $name, $p := fromYaml (include "robustrl.agentPools" .) -}}
{{- $where := ternary "agent" (printf "agent.pools.%s" $name) (eq $name "") -}}
{{- if and (has $p.role (list "trainer" "hybrid")) (not $p.roleCertificateHostPath) -}}
{{- fail (printf "agent.roleCertificateHostPath is required for agent.role=%s (%s): the services refuse a %s's registration without the operator's certificate for its role. On each node write `robustrl identity role-certificate <node name> %s` to that path" $p.role $where $p.role $p.role) -}}
{{- end -}}
{{- if and (eq $.Values.agent.integration "cooperate") (or $p.trainerCommand $p.rolloutCommand) -}}
{{- fail (printf "%s: no trainerCommand or rolloutCommand with agent.integration=cooperate, where the framework starts its own processes" $where) -}}
{{- end -}}
{{- if and (ne $name "") (not (index $.Values.agent.pools $name).nodeSelector) -}}
{{- fail (printf "agent.pools.%s.nodeSelector is required: the labels of the pool's nodes" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with .Values.kafka.sasl -}}
{{- if .mechanism -}}
{{- if not $.Values.kafka.tls.enabled -}}
{{- fail "kafka.sasl.mechanism needs kafka.tls.enabled: a login is never sent in the clear" -}}
{{- end -}}
{{- if not .loginsSecret -}}
{{- fail "kafka.sasl.loginsSecret is required with kafka.sasl.mechanism: a Secret with each service's password under its name" -}}
{{- end -}}
{{- if and $.Values.agent.enabled (not .agentPasswordHostPath) -}}
{{- fail "kafka.sasl.agentPasswordHostPath is required with kafka.sasl.mechanism and agent.enabled: each agent's own password, on its node" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (or .Values.kafka.tls.enabled .Values.kafka.sasl.mechanism) .Values.kafka.bundled -}}
{{- fail "kafka.tls and kafka.sasl are for an external cluster: the bundled broker is plaintext, for trials" -}}
{{- end -}}
{{- if and .Values.kafka.acls.grant (or (not .Values.kafka.acls.adminSecret) (not .Values.kafka.sasl.mechanism)) -}}
{{- fail "kafka.acls.grant needs kafka.sasl.mechanism and kafka.acls.adminSecret (a login allowed to alter ACLs)" -}}
{{- end -}}
{{- if lt (int .Values.services.detector.shards) 1 -}}
{{- fail "services.detector.shards must be at least 1" -}}
{{- end -}}
{{- end -}}

{{/* Keep the control plane off GPU nodes (paper §3: management roles never share a GPU machine). */}}
{{- define "robustrl.offGpuNodes" -}}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: {{ .Values.gpuNodeLabel.key }}
              operator: NotIn
              values: [{{ .Values.gpuNodeLabel.value | quote }}]
{{- end -}}

{{- define "robustrl.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile: { type: RuntimeDefault }
{{- end -}}
{{- define "robustrl.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: { drop: [ALL] }
{{- end -}}


{{/*
A Kafka client's settings: TLS (the CA from kafka.tls.caSecret) and its login. dict: root, login (the
username; an agent's uses $(ROBUSTRL_MACHINE_ID)), passwordFile. Volumes: robustrl.kafkaVolumes.
*/}}
{{- define "robustrl.kafkaEnv" -}}
- { name: KAFKA_BROKERS, value: {{ include "robustrl.kafkaBrokers" .root | quote }} }
{{- if .root.Values.kafka.tls.enabled }}
{{- if .root.Values.kafka.tls.caSecret }}
- { name: KAFKA_SSL_CA_FILE, value: /run/secrets/kafka-ca/ca.crt }
{{- else }}
- { name: KAFKA_SSL, value: 'true' }
{{- end }}
{{- end }}
{{- with .root.Values.kafka.sasl.mechanism }}
- { name: KAFKA_SASL_MECHANISM, value: {{ . | quote }} }
- { name: KAFKA_SASL_USERNAME, value: {{ printf "%s%s" $.root.Values.kafka.sasl.loginPrefix $.login | quote }} }
- { name: KAFKA_SASL_PASSWORD_FILE, value: {{ $.passwordFile | quote }} }
{{- end }}
{{- end -}}
{{- define "robustrl.kafkaCaVolume" -}}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- name: kafka-ca
  secret: { secretName: {{ .Values.kafka.tls.caSecret | quote }}, items: [{ key: ca.crt, path: ca.crt }] }
{{- end }}
{{- end -}}
{{- define "robustrl.kafkaCaMount" -}}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- { name: kafka-ca, mountPath: /run/secrets/kafka-ca, readOnly: true }
{{- end }}
{{- end -}}

{{/*
The agent's node pools, name → settings, each pool's own over the agent's defaults (values.yaml `agent`).
No pools: one unnamed pool, every GPU node, as `agent.role`. Every pool stays on GPU nodes (gpuNodeLabel is
added to its nodeSelector): management roles never share a GPU machine the other way round either.
*/}}
{{- define "robustrl.agentPools" -}}
{{- $a := .Values.agent -}}
{{- $gpu := dict .Values.gpuNodeLabel.key .Values.gpuNodeLabel.value -}}
{{- $defaults := dict "role" $a.role "trainerCommand" $a.trainerCommand "rolloutCommand" $a.rolloutCommand "trainerWorldSize" $a.trainerWorldSize "gpus" $a.gpus "roleCertificateHostPath" $a.roleCertificateHostPath "engines" "" "engineWeights" "off" "resources" $a.resources "env" dict "nodeSelector" dict -}}
{{- $pools := dict -}}
{{- if $a.pools -}}
{{- range $name, $p := $a.pools -}}
{{- $merged := merge (deepCopy $p) (deepCopy $defaults) -}}
{{- $_ := set $merged "nodeSelector" (merge (deepCopy $p.nodeSelector) $gpu) -}}
{{- $_ := set $merged "env" (merge (deepCopy ($p.env | default dict)) (deepCopy $a.env)) -}}
{{- $_ := set $pools $name $merged -}}
{{- end -}}
{{- else -}}
{{- $merged := deepCopy $defaults -}}
{{- $_ := set $merged "nodeSelector" $gpu -}}
{{- $_ := set $merged "env" (deepCopy $a.env) -}}
{{- $_ := set $pools "" $merged -}}
{{- end -}}
{{- toYaml $pools -}}
{{- end -}}

{{/* Where the framework's pods find their node's agent: its socket in agent.socketDir. */}}
{{- define "robustrl.agentSocket" -}}
/run/robustrl/agent.sock
{{- end -}}
