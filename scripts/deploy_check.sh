#!/usr/bin/env bash
# Validates deploy/ with the real tools (no container engine or cluster here, so nothing is
# built or deployed): yamllint over every YAML file; promtool on the Prometheus config and
# rules; helm lint and helm template over several value sets, each rendering checked by
# kubernetes-validate --strict against the Kubernetes 1.31 schemas; values.schema.json must
# refuse bad values; the rendered Envoy config is checked for what the balancing depends on.
# Tools: yamllint and promtool from Debian (scripts/setup.sh), helm and kubernetes-validate from
# PyPI in a venv (scripts/setup.sh makes it). Prints "skipped: ..." when a tool is missing.
# Prints "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
tools="${FLASHSERVE_TOOLS:-$HOME/.cache/flashserve-tools}"
export PATH="$tools/bin:$PATH"
for t in yamllint promtool helm kubernetes-validate; do
  command -v "$t" >/dev/null || { echo "skipped: $t not installed (bash scripts/setup.sh installs it)"; exit 0; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
passed=0 failed=0
check() {
  if eval "$2" >"$out/log" 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $1"
    tail -n 20 "$out/log"
  fi
}
chart=deploy/helm/flashserve
check "yamllint deploy/" 'yamllint -s -c deploy/.yamllint deploy/'
check "promtool check config" 'promtool check config deploy/prometheus/prometheus.yml'
check "promtool check rules" 'promtool check rules deploy/prometheus/rules.yml'
check "helm lint" 'helm lint --strict $chart'
render() {  # name, then --set arguments
  local name=$1
  shift
  helm template fs "$chart" --namespace serving "$@" >"$out/$name.yaml"
}
valid() { kubernetes-validate --strict --quiet -k 1.31.0 "$out/$1.yaml"; }
check "render the defaults" 'render defaults'
check "defaults are valid Kubernetes 1.31" 'valid defaults'
check "render autoscaling + ServiceMonitor + hostPath + token" \
  'render all --set autoscaling.enabled=true --set metrics.serviceMonitor.enabled=true --set model.hostPath=/srv/models --set server.authTokenSecret=fs-token --set server.numBlocks=4096'
check "that rendering is valid" 'valid all'
check "render without Envoy and the PDB" 'render bare --set envoy.enabled=false --set podDisruptionBudget.enabled=false'
check "that rendering is valid" 'valid bare'
check "render with the pool sized by memory" 'render sized --set-json server.gpuMemoryUtilization=0.8'
check "... which sets FLASHSERVE_GPU_MEMORY_UTILIZATION=0.8 and no other sizing" \
  'grep -A1 "name: FLASHSERVE_GPU_MEMORY_UTILIZATION" $out/sized.yaml | grep -q "value: \"0.8\"" && ! grep -q "FLASHSERVE_NUM_BLOCKS\|FLASHSERVE_KV_CACHE_MEMORY" $out/sized.yaml'
check "render with a byte budget" 'render bytes --set server.kvCacheMemory=34359738368'
check "... which sets FLASHSERVE_KV_CACHE_MEMORY=34359738368" \
  'grep -A1 "name: FLASHSERVE_KV_CACHE_MEMORY" $out/bytes.yaml | grep -q "value: \"34359738368\""'
check "two ways of sizing the pool are refused" \
  "! helm template fs $chart --set server.numBlocks=4096 --set-json server.gpuMemoryUtilization=0.5"
kinds() { grep "^kind:" "$out/$1.yaml" | awk '{print $2}' | sort | tr '\n' ' '; }
check "defaults: 2 Deployments, 3 Services, ConfigMap, PDB" \
  '[ "$(kinds defaults)" = "ConfigMap Deployment Deployment PodDisruptionBudget Service Service Service " ]'
check "autoscaling adds the HPA (no fixed replicas) and the ServiceMonitor" \
  'grep -q "^kind: HorizontalPodAutoscaler" $out/all.yaml && grep -q "^kind: ServiceMonitor" $out/all.yaml && [ "$(grep -c "^  replicas:" $out/all.yaml)" = 1 ]'
check "bare: only the server and its Services" '[ "$(kinds bare)" = "Deployment Service Service " ]'
# The schema refuses bad values.
for bad in "server.grpcPort=0" "resources.limits.nvidia\\.com/gpu=0" "image.pullPolicy=Sometimes" \
           "envoy.healthCheckInterval=2000" "envoy.healthCheckInterval=500ms" "model.path=relative" "server.unknownKey=1" \
           "server.kvCacheMemory=-1"; do
  check "schema refuses $bad" "! helm template fs $chart --set '$bad'"
done
check "schema refuses server.gpuMemoryUtilization=1.5" "! helm template fs $chart --set-json server.gpuMemoryUtilization=1.5"
# What the per-request balancing depends on, in the Envoy config as rendered.
check "rendered Envoy config" "$tools/bin/python3 - \"$out/defaults.yaml\" <<'PY'
import re, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = next(d for d in docs if d['kind'] == 'ConfigMap')
envoy = yaml.safe_load(cm['data']['envoy.yaml'])
cl = envoy['static_resources']['clusters'][0]
assert cl['type'] == 'STRICT_DNS' and cl['lb_policy'] in ('LEAST_REQUEST', 'ROUND_ROBIN'), cl
opts = cl['typed_extension_protocol_options']['envoy.extensions.upstreams.http.v3.HttpProtocolOptions']
assert 'http2_protocol_options' in opts['explicit_http_config'], 'upstream must be HTTP/2 (gRPC)'
hc = cl['health_checks'][0]
assert hc['grpc_health_check']['service_name'] == 'flashserve.v1.Generation', hc
assert re.fullmatch(r'[0-9]+([.][0-9]+)?s', hc['interval']), hc
addr = cl['load_assignment']['endpoints'][0]['lb_endpoints'][0]['endpoint']['address']['socket_address']
assert addr['address'] == 'fs-flashserve-headless', addr
assert int(addr['port_value']) == 50051, addr
svc = next(d for d in docs if d['kind'] == 'Service' and d['metadata']['name'] == 'fs-flashserve-headless')
assert svc['spec']['clusterIP'] == 'None'
dep = next(d for d in docs if d['kind'] == 'Deployment' and d['metadata']['name'] == 'fs-flashserve')
c = dep['spec']['template']['spec']['containers'][0]
assert c['readinessProbe']['grpc']['port'] == 50051 and c['livenessProbe']['grpc']['port'] == 50051
assert c['resources']['limits']['nvidia.com/gpu'] == 1
assert any(v['name'] == 'dshm' and v['emptyDir']['medium'] == 'Memory' for v in dep['spec']['template']['spec']['volumes'])
PY"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
