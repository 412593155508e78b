{{/*
Shared pieces of the service templates. Each service's own template (gateway.yaml, contacts.yaml, …)
holds its Deployment, Service, ports, probes and the env variables it reads; what is the same for all of
them lives here.
*/}}

{{- define "rrs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "rrs.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of one service's objects: <fullname>-<service>. Args: (list $ "cascade-scheduler") */}}
{{- define "rrs.componentName" -}}
{{- $root := index . 0 -}}
{{- printf "%s-%s" (include "rrs.fullname" $root | trunc 40 | trimSuffix "-") (index . 1) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Name of a hook Job: <base>-<suffix>, the base shortened so the whole stays within 63 characters (the Job
controller puts the name in its pods' job-name label, and a longer label value makes the API refuse the
Job). Args: (list (include "rrs.fullname" .) "provision-bus")
*/}}
{{- define "rrs.jobName" -}}
{{- $suffix := index . 1 -}}
{{- printf "%s-%s" (index . 0 | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix -}}
{{- end -}}

{{- define "rrs.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "rrs.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "rrs.labels" -}}
{{- $root := index . 0 -}}
{{ include "rrs.selectorLabels" . }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: review-request-service
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Image of a service. Args: (list $ "gateway" .Values.gateway) */}}
{{- define "rrs.image" -}}
{{- $root := index . 0 -}}
{{- $svc := index . 2 -}}
{{- $repo := default (printf "%s/%s" $root.Values.image.registry (index . 1)) $svc.image.repository -}}
{{- $tag := default (default $root.Chart.AppVersion $root.Values.image.tag) $svc.image.tag -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{- define "rrs.pullPolicy" -}}
{{- $root := index . 0 -}}
{{- default $root.Values.image.pullPolicy (index . 1).image.pullPolicy -}}
{{- end -}}

{{/* The Secret a service reads: its own existingSecret, the global one, or the chart's. Args: (list $ .Values.gateway) */}}
{{- define "rrs.secretName" -}}
{{- $root := index . 0 -}}
{{- $svc := index . 1 -}}
{{- if $svc.existingSecret -}}
{{- $svc.existingSecret -}}
{{- else if $root.Values.secrets.existingSecret -}}
{{- $root.Values.secrets.existingSecret -}}
{{- else -}}
{{- printf "%s-secrets" (include "rrs.fullname" $root) -}}
{{- end -}}
{{- end -}}

{{/* One env variable from the Secret. Args: (list $ .Values.gateway "REDIS_URL" true) — true = optional */}}
{{- define "rrs.secretEnv" -}}
- name: {{ index . 2 }}
  valueFrom:
    secretKeyRef:
      name: {{ include "rrs.secretName" (list (index . 0) (index . 1)) }}
      key: {{ index . 2 }}
      optional: {{ index . 3 }}
{{- end -}}

{{/*
A value as an env variable's string. Helm reads every number of the values as a float, and a float of a
million or more prints as 1.2e+06: whole numbers are written as digits instead.
*/}}
{{- define "rrs.envString" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* host:port of a gRPC service of this release, or its externalAddress. Args: (list $ "contacts" .Values.contacts 50051) */}}
{{- define "rrs.address" -}}
{{- $svc := index . 2 -}}
{{- if $svc.externalAddress -}}
{{- $svc.externalAddress -}}
{{- else -}}
{{- /* The headless Service: every replica's address, balanced round robin by the caller. */ -}}
{{- printf "dns:///%s-grpc:%v" (include "rrs.componentName" (list (index . 0) (index . 1))) (index . 3) -}}
{{- end -}}
{{- end -}}

{{/* What every service reads besides its own settings. Args: (list $ "gateway") */}}
{{- define "rrs.commonEnv" -}}
{{- $root := index . 0 -}}
{{- $attrs := list (printf "service.namespace=%s" $root.Release.Name) (printf "k8s.namespace.name=%s" $root.Release.Namespace) -}}
{{- with $root.Values.otel.resourceAttributes }}{{ $attrs = append $attrs . }}{{ end -}}
- name: LOG_LEVEL
  value: {{ $root.Values.logLevel | quote }}
{{- if $root.Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $root.Values.otel.endpoint | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ index . 1 | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attrs | quote }}
{{- end }}
{{- end -}}

{{/* The service's `env` map and raw `extraEnv` entries. Args: (list $ .Values.gateway) */}}
{{- define "rrs.extraEnv" -}}
{{- $svc := index . 1 -}}
{{- range $name, $value := $svc.env }}
- name: {{ $name }}
  value: {{ include "rrs.envString" $value | quote }}
{{- end }}
{{- with $svc.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The pod is non-root (uid 1000, the images' `node` user) with a read-only root filesystem. */}}
{{- define "rrs.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
fsGroup: 1000
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "rrs.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The only writable place: /tmp. */}}
{{- define "rrs.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "rrs.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/* Pod-level settings from podDefaults, overridable per service. Args: (list $ .Values.gateway "gateway") */}}
{{- define "rrs.podSpecCommon" -}}
{{- $root := index . 0 -}}
{{- $svc := index . 1 -}}
{{- $d := $root.Values.podDefaults -}}
serviceAccountName: {{ include "rrs.componentName" (list $root (index . 2)) }}
automountServiceAccountToken: false
terminationGracePeriodSeconds: {{ default $d.terminationGracePeriodSeconds $svc.terminationGracePeriodSeconds }}
securityContext:
  {{- include "rrs.podSecurityContext" $root | nindent 2 }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $d.nodeSelector $svc.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $d.tolerations $svc.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $d.affinity $svc.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $d.topologySpreadConstraints $svc.topologySpreadConstraints) }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  {{- include "rrs.tmpVolume" $root | nindent 2 }}
{{- end -}}

{{/* Pod template metadata. Args: (list $ .Values.gateway "gateway") */}}
{{- define "rrs.podMetadata" -}}
{{- $root := index . 0 -}}
{{- $svc := index . 1 -}}
labels:
  {{- include "rrs.labels" (list $root (index . 2)) | nindent 2 }}
  {{- with (merge (dict) ($svc.podLabels | default dict) $root.Values.podDefaults.podLabels) }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  {{- /* A changed chart Secret restarts the pods that read it. */}}
  checksum/secret: {{ include "rrs.secretData" $root | sha256sum }}
  {{- with (merge (dict) ($svc.podAnnotations | default dict) $root.Values.podDefaults.podAnnotations) }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* Every service: its name (objects, image, component label) and its key in values.yaml. */}}
{{- define "rrs.services" -}}
gateway: gateway
contacts: contacts
cascade-scheduler: cascadeScheduler
channel-email: channelEmail
channel-sms: channelSms
channel-messenger: channelMessenger
webhooks: webhooks
connectors: connectors
{{- end -}}

{{/*
What each service's migrations Job applies: the same (schema, component, folder) triples its start
function applies, run from the image's /app. test/helm-chart.test.ts compares the rendered Jobs with the
services' code.
*/}}
{{- define "rrs.migrationPlans" -}}
contacts:
  key: contacts
  args: ["--schema", "contacts", "service=migrations", "idempotency=node_modules/@rrs/idempotency/migrations"]
cascade-scheduler:
  key: cascadeScheduler
  args: ["--schema", "scheduler", "service=migrations", "idempotency=node_modules/@rrs/idempotency/migrations"]
webhooks:
  key: webhooks
  args: ["--schema", "webhooks", "service=migrations", "idempotency=node_modules/@rrs/idempotency/migrations"]
channel-email:
  key: channelEmail
  args: ["--schema", "channel_email", "sender-kit=node_modules/@rrs/sender-kit/migrations"]
channel-sms:
  key: channelSms
  args: ["--schema", "channel_sms", "service=migrations", "sender-kit=node_modules/@rrs/sender-kit/migrations"]
channel-messenger:
  key: channelMessenger
  args: ["--schema", "channel_messenger", "service=migrations", "sender-kit=node_modules/@rrs/sender-kit/migrations"]
connectors:
  key: connectors
  args: ["--schema", "connectors", "service=migrations", "idempotency=node_modules/@rrs/idempotency/migrations"]
{{- end -}}

{{/*
The architecture's arrows: who calls whose gRPC port. The NetworkPolicies are built from this. A callee
with an `externalAddress` setting can run in another release; one without it (connectors) is simply
absent when disabled.
*/}}
{{- define "rrs.grpcArrows" -}}
contacts:
  key: contacts
  port: 50051
  from: [gateway, cascade-scheduler, channel-sms, connectors]
cascade-scheduler:
  key: cascadeScheduler
  port: 50052
  from: [gateway, connectors, channel-messenger]
webhooks:
  key: webhooks
  port: 50053
  from: [gateway]
connectors:
  key: connectors
  port: 50054
  from: [gateway]
{{- end -}}

{{/* The chart's Secret data (also hashed into the pods' annotations). */}}
{{- define "rrs.secretData" -}}
{{- $v := .Values -}}
{{- $data := dict -}}
{{- if $v.postgresql.url }}{{ $_ := set $data "DATABASE_URL" $v.postgresql.url }}{{ end -}}
{{- if $v.nats.url }}{{ $_ := set $data "NATS_URL" $v.nats.url }}{{ end -}}
{{- if $v.redis.url }}{{ $_ := set $data "REDIS_URL" $v.redis.url }}{{ end -}}
{{- if $v.secrets.adminToken }}{{ $_ := set $data "ADMIN_TOKEN" $v.secrets.adminToken }}{{ end -}}
{{- if $v.secrets.smtpUrl }}{{ $_ := set $data "SMTP_URL" $v.secrets.smtpUrl }}{{ end -}}
{{- if $v.secrets.dkimPrivateKeys }}{{ $_ := set $data "DKIM_PRIVATE_KEYS" $v.secrets.dkimPrivateKeys }}{{ end -}}
{{- if $v.secrets.smscLogin }}{{ $_ := set $data "SMSC_LOGIN" $v.secrets.smscLogin }}{{ end -}}
{{- if $v.secrets.smscPassword }}{{ $_ := set $data "SMSC_PASSWORD" $v.secrets.smscPassword }}{{ end -}}
{{- if $v.secrets.smsruApiId }}{{ $_ := set $data "SMSRU_API_ID" $v.secrets.smsruApiId }}{{ end -}}
{{- if $v.secrets.postmarkServerToken }}{{ $_ := set $data "POSTMARK_SERVER_TOKEN" $v.secrets.postmarkServerToken }}{{ end -}}
{{- if $v.secrets.postmarkWebhookSecret }}{{ $_ := set $data "POSTMARK_WEBHOOK_SECRET" $v.secrets.postmarkWebhookSecret }}{{ end -}}
{{- if $v.secrets.maxIdInstance }}{{ $_ := set $data "MAX_ID_INSTANCE" (include "rrs.envString" $v.secrets.maxIdInstance) }}{{ end -}}
{{- if $v.secrets.maxApiToken }}{{ $_ := set $data "MAX_API_TOKEN" $v.secrets.maxApiToken }}{{ end -}}
{{- if $v.secrets.maxWebhookToken }}{{ $_ := set $data "MAX_WEBHOOK_TOKEN" $v.secrets.maxWebhookToken }}{{ end -}}
{{- if $v.secrets.telegramWebhookToken }}{{ $_ := set $data "TELEGRAM_WEBHOOK_TOKEN" $v.secrets.telegramWebhookToken }}{{ end -}}
{{- if $v.secrets.telegramIdInstance }}{{ $_ := set $data "TELEGRAM_ID_INSTANCE" (include "rrs.envString" $v.secrets.telegramIdInstance) }}{{ end -}}
{{- if $v.secrets.telegramApiToken }}{{ $_ := set $data "TELEGRAM_API_TOKEN" $v.secrets.telegramApiToken }}{{ end -}}
{{- if $v.secrets.maxBotToken }}{{ $_ := set $data "MAX_BOT_TOKEN" $v.secrets.maxBotToken }}{{ end -}}
{{- if $v.secrets.maxBotWebhookSecret }}{{ $_ := set $data "MAX_BOT_WEBHOOK_SECRET" $v.secrets.maxBotWebhookSecret }}{{ end -}}
{{- if $v.secrets.telegramBotToken }}{{ $_ := set $data "TELEGRAM_BOT_TOKEN" $v.secrets.telegramBotToken }}{{ end -}}
{{- if $v.secrets.telegramBotWebhookSecret }}{{ $_ := set $data "TELEGRAM_BOT_WEBHOOK_SECRET" $v.secrets.telegramBotWebhookSecret }}{{ end -}}
{{- if $v.secrets.connectorSecretKeys }}{{ $_ := set $data "CONNECTOR_SECRET_KEYS" $v.secrets.connectorSecretKeys }}{{ end -}}
{{- if $v.secrets.webhookSecretKeys }}{{ $_ := set $data "WEBHOOK_SECRET_KEYS" $v.secrets.webhookSecretKeys }}{{ end -}}
{{- if $v.secrets.personHashKey }}{{ $_ := set $data "PERSON_HASH_KEY" $v.secrets.personHashKey }}{{ end -}}
{{- toYaml $data -}}
{{- end -}}

{{- /*
Refuses the values with a message. `helm template` and `install` stop at `fail`; `helm lint` only logs
a `fail` ("[INFO] Fail: …") and passes the chart. So what follows it, which only lint reaches, is a
Deployment named by the message and without a selector, which lint counts as an error ("[ERROR]
templates/validate.yaml: a Deployment must contain matchLabels or matchExpressions, and "values
refused: …" does not"): the chart fails lint, each refusal named.
*/ -}}
{{- define "rrs.refuse" -}}
{{- fail . -}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ printf "values refused: %s" . | quote }}
{{ end -}}

{{/* Checks that fail the render with a message instead of pods that crash at start. */}}
{{- define "rrs.validate" -}}
{{- $v := .Values -}}
{{- /* The chart has no registry of its own: each image comes from image.registry or the service's image.repository. */ -}}
{{- if not $v.image.registry -}}
{{- $unnamed := list -}}
{{- range $service, $key := include "rrs.services" . | fromYaml -}}
{{- $svc := index $v $key -}}
{{- if and $svc.enabled (not $svc.image.repository) -}}{{- $unnamed = append $unnamed $service -}}{{- end -}}
{{- end -}}
{{- if and $v.jobs.provisionBus.enabled (not ($v.jobs.provisionBus.image | default dict).repository) (not $v.cascadeScheduler.image.repository) -}}{{- $unnamed = append $unnamed "the provision-bus Job" -}}{{- end -}}
{{- if $unnamed -}}
{{- include "rrs.refuse" (printf "image.registry is required: the registry you pushed the images to, e.g. ghcr.io/acme/review-request-service (docs/container-images.md); or give %s its own image.repository" (join ", " (uniq $unnamed))) -}}
{{- end -}}
{{- end -}}
{{- if not $v.secrets.existingSecret -}}
{{- if not $v.postgresql.url -}}
{{- include "rrs.refuse" "postgresql.url is required (or secrets.existingSecret with a DATABASE_URL key)" -}}
{{- end -}}
{{- if not $v.nats.url -}}
{{- include "rrs.refuse" "nats.url is required (or secrets.existingSecret with a NATS_URL key)" -}}
{{- end -}}
{{- if and (not $v.redis.url) $v.gateway.enabled (or $v.gateway.autoscaling.enabled (gt (int $v.gateway.replicaCount) 1)) -}}
{{- include "rrs.refuse" "redis.url is required when the gateway runs more than one replica: rate limits and the auth cache must be shared" -}}
{{- end -}}
{{- if and (not $v.redis.url) $v.channelMessenger.enabled (or $v.channelMessenger.autoscaling.enabled (gt (int $v.channelMessenger.replicaCount) 1)) -}}
{{- include "rrs.refuse" "redis.url is required when channel-messenger runs more than one replica: send rates must be shared" -}}
{{- end -}}
{{- if and (not $v.redis.url) $v.connectors.enabled (or $v.connectors.autoscaling.enabled (gt (int $v.connectors.replicaCount) 1)) -}}
{{- include "rrs.refuse" "redis.url is required when connectors runs more than one replica: the request budget of each CRM account must be shared" -}}
{{- end -}}
{{- if and $v.connectors.enabled (not $v.connectors.existingSecret) (not $v.secrets.connectorSecretKeys) -}}
{{- include "rrs.refuse" "secrets.connectorSecretKeys is required while connectors is enabled: the key(s) that seal the CRM credentials (make one with: openssl rand -base64 32)" -}}
{{- end -}}
{{- /* SMTP mail is DKIM-signed in production (the images' NODE_ENV): keys, or the relay signs. */ -}}
{{- $email := $v.channelEmail -}}
{{- if and $email.enabled (not $email.existingSecret) $v.secrets.smtpUrl (not $v.secrets.dkimPrivateKeys) (ne (toString (index ($email.env | default dict) "DKIM_SIGNED_BY_RELAY")) "true") -}}
{{- include "rrs.refuse" "secrets.dkimPrivateKeys is required with secrets.smtpUrl: SMTP mail is DKIM-signed (Gmail and Microsoft refuse unauthenticated bulk mail); give the key(s) and channelEmail.env.DKIM_SELECTORS, or set channelEmail.env.DKIM_SIGNED_BY_RELAY: \"true\" if your SMTP relay signs for you" -}}
{{- end -}}
{{- if and $email.enabled (not $email.existingSecret) $v.secrets.dkimPrivateKeys (not (index ($email.env | default dict) "DKIM_SELECTORS")) -}}
{{- include "rrs.refuse" "channelEmail.env.DKIM_SELECTORS is required with secrets.dkimPrivateKeys: the selector of each key, in the same order (e.g. rrs2026)" -}}
{{- end -}}
{{- if and $v.webhooks.enabled (not $v.webhooks.existingSecret) (not $v.secrets.webhookSecretKeys) -}}
{{- include "rrs.refuse" "secrets.webhookSecretKeys is required while webhooks is enabled: the key(s) that seal the webhook signing secrets (make one with: openssl rand -base64 32)" -}}
{{- end -}}
{{- if and $v.cascadeScheduler.enabled (not $v.cascadeScheduler.existingSecret) (not $v.secrets.personHashKey) -}}
{{- include "rrs.refuse" "secrets.personHashKey is required while cascadeScheduler is enabled: the key of the keyed hashes that keep an erased person's opt-out (make one with: openssl rand -base64 32; keep it: a new key forgets every hashed opt-out)" -}}
{{- end -}}
{{- end -}}
{{- /* A gRPC service left out of this release must be reachable elsewhere by those that call it. */ -}}
{{- $services := include "rrs.services" . | fromYaml -}}
{{- range $callee, $arrow := include "rrs.grpcArrows" . | fromYaml -}}
{{- $calleeValues := index $v $arrow.key -}}
{{- if and (hasKey $calleeValues "externalAddress") (not $calleeValues.enabled) (not $calleeValues.externalAddress) -}}
{{- $callers := list -}}
{{- range $arrow.from -}}
{{- if (index $v (index $services .)).enabled -}}{{- $callers = append $callers . -}}{{- end -}}
{{- end -}}
{{- if $callers -}}
{{- include "rrs.refuse" (printf "%s is disabled: set %s.externalAddress to the host:port of a %s run elsewhere (called by %s)" $arrow.key $arrow.key $callee (join ", " $callers)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $v.channelSms.receipts.ingress.enabled (not $v.gateway.ingress.enabled) -}}
{{- include "rrs.refuse" "channelSms.receipts.ingress needs gateway.ingress (the receipts path is added to its host)" -}}
{{- end -}}
{{- if and $v.channelMessenger.bots.ingress.enabled (not $v.gateway.ingress.enabled) -}}
{{- include "rrs.refuse" "channelMessenger.bots.ingress needs gateway.ingress (the bots path is added to its host)" -}}
{{- end -}}
{{- if and $v.channelEmail.receipts.ingress.enabled (not $v.gateway.ingress.enabled) -}}
{{- include "rrs.refuse" "channelEmail.receipts.ingress needs gateway.ingress (the receipts path is added to its host)" -}}
{{- end -}}
{{- /* Without the gateway the release has no Ingress at all (a split release routes its own paths). */ -}}
{{- if and $v.connectors.enabled $v.connectors.hooks.ingress.enabled $v.gateway.enabled (not $v.gateway.ingress.enabled) -}}
{{- include "rrs.refuse" "connectors.hooks.ingress needs gateway.ingress (the /hooks/crm path is added to its host): route /hooks/crm to the connectors Service's hooks port yourself and set connectors.hooks.ingress.enabled=false" -}}
{{- end -}}
{{- include "rrs.validateProviders" . -}}
{{- end -}}

{{- /*
Whether a sender's env (its `env` map or an `extraEnv` item) sets a variable. Args: (list $svc "SMTP_URL").
*/ -}}
{{- define "rrs.envSet" -}}
{{- $svc := index . 0 -}}
{{- $name := index . 1 -}}
{{- $set := hasKey ($svc.env | default dict) $name -}}
{{- range ($svc.extraEnv | default list) -}}{{- if eq .name $name -}}{{- $set = true -}}{{- end -}}{{- end -}}
{{- if $set -}}true{{- end -}}
{{- end -}}

{{- /*
Each channel's providers as this release configures them ("Production never pretends", docs/channels.md
"The sink and production"), as YAML: channel → { sender, providers (failover order), sink, secret }.
`sink`: the sender was asked for the sink by name (EMAIL_PROVIDERS=sink, SMS_PROVIDERS=sink,
MESSENGER_SINK): nothing is delivered. `secret`: the credentials come from a Secret the chart does not
read, so it cannot tell (the sender then refuses to start without a provider). The same order rules as the
senders' providerOrder: the variable's list, else every configured provider (SMTP before Postmark, SMSC
before SMS.ru).
*/ -}}
{{- define "rrs.channelProviders" -}}
{{- $v := .Values -}}
{{- $s := $v.secrets -}}
{{- $out := dict -}}
{{- if $v.channelEmail.enabled -}}
{{- $svc := $v.channelEmail -}}
{{- $listed := toString (index ($svc.env | default dict) "EMAIL_PROVIDERS" | default "") -}}
{{- $configured := list -}}
{{- $own := not (or $svc.existingSecret $s.existingSecret) -}}
{{- if or (and $own $s.smtpUrl) (include "rrs.envSet" (list $svc "SMTP_URL")) -}}{{- $configured = append $configured "smtp" -}}{{- end -}}
{{- if or (and $own $s.postmarkServerToken) (include "rrs.envSet" (list $svc "POSTMARK_SERVER_TOKEN")) -}}{{- $configured = append $configured "postmark" -}}{{- end -}}
{{- $_ := set $out "Email" (dict "sender" "channel-email" "variable" "EMAIL_PROVIDERS=sink" "needs" "secrets.smtpUrl or secrets.postmarkServerToken" "providers" (ternary (splitList "," $listed) $configured (ne $listed "")) "sink" (eq $listed "sink") "secret" (or $svc.existingSecret $s.existingSecret | default "")) -}}
{{- end -}}
{{- if $v.channelSms.enabled -}}
{{- $svc := $v.channelSms -}}
{{- $listed := toString (index ($svc.env | default dict) "SMS_PROVIDERS" | default "") -}}
{{- $configured := list -}}
{{- $own := not (or $svc.existingSecret $s.existingSecret) -}}
{{- if or (and $own $s.smscLogin) (include "rrs.envSet" (list $svc "SMSC_LOGIN")) -}}{{- $configured = append $configured "smsc" -}}{{- end -}}
{{- if or (and $own $s.smsruApiId) (include "rrs.envSet" (list $svc "SMSRU_API_ID")) -}}{{- $configured = append $configured "smsru" -}}{{- end -}}
{{- $_ := set $out "SMS" (dict "sender" "channel-sms" "variable" "SMS_PROVIDERS=sink" "needs" "secrets.smscLogin and secrets.smscPassword, or secrets.smsruApiId" "providers" (ternary (splitList "," $listed) $configured (ne $listed "")) "sink" (eq $listed "sink") "secret" (or $svc.existingSecret $s.existingSecret | default "")) -}}
{{- end -}}
{{- if $v.channelMessenger.enabled -}}
{{- $svc := $v.channelMessenger -}}
{{- $sinks := splitList "," (toString (index ($svc.env | default dict) "MESSENGER_SINK" | default "")) -}}
{{- $secret := or $svc.existingSecret $s.existingSecret | default "" -}}
{{- range $messenger := list "max" "telegram" -}}
{{- $key := upper $messenger -}}
{{- $account := or (and (not $secret) (index $s (printf "%sIdInstance" $messenger)) (index $s (printf "%sApiToken" $messenger))) (include "rrs.envSet" (list $svc (printf "%s_ID_INSTANCE" $key))) -}}
{{- $sink := has $messenger $sinks -}}
{{- $_ := set $out (ternary "MAX" "Telegram" (eq $messenger "max")) (dict "sender" "channel-messenger" "variable" "MESSENGER_SINK" "needs" (printf "secrets.%sIdInstance and secrets.%sApiToken" $messenger $messenger) "providers" (ternary (list "GREEN-API working account") (ternary (list "sink") list $sink) (not (empty $account))) "sink" $sink "secret" $secret) -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{- /*
An enabled sender without a provider does not render: in production (the images' NODE_ENV) it would
refuse to start, and the sink is taken only when named. The messenger needs one messenger with an
account (or named in MESSENGER_SINK); the other is then announced unavailable. Credentials in a Secret
the chart does not read are not checked here: the sender checks them at start.
*/ -}}
{{- define "rrs.validateProviders" -}}
{{- $channels := include "rrs.channelProviders" . | fromYaml -}}
{{- $services := include "rrs.services" . | fromYaml -}}
{{- range $label := list "Email" "SMS" -}}
{{- $c := index $channels $label -}}
{{- if and $c (not $c.secret) (empty $c.providers) -}}
{{- include "rrs.refuse" (printf "%s is enabled without a provider: set %s (%s: no message would be delivered), or %s.env.%s for a staging whose messages are not delivered, or disable it" $c.sender $c.needs $label (index $services $c.sender) $c.variable) -}}
{{- end -}}
{{- end -}}
{{- $max := index $channels "MAX" -}}
{{- $telegram := index $channels "Telegram" -}}
{{- if and $max (not $max.secret) (empty $max.providers) (empty $telegram.providers) -}}
{{- include "rrs.refuse" "channel-messenger is enabled without a provider: set secrets.maxIdInstance and secrets.maxApiToken, or secrets.telegramIdInstance and secrets.telegramApiToken (a GREEN-API working account), or channelMessenger.env.MESSENGER_SINK (max,telegram) for a staging whose messages are not delivered, or disable it" -}}
{{- end -}}
{{- end -}}
