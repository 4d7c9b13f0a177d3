#!/usr/bin/env bash
# Validates deploy/ with the real tools (no container engine or cluster here, so nothing is
# built or deployed): yamllint over every YAML file; promtool on the Prometheus config and
# rules; helm lint and helm template over several value sets, each rendering checked by
# kubernetes-validate --strict against the Kubernetes 1.31 schemas; values.schema.json must
# refuse bad values; the rendered manifests are checked for the ports, probes and scrape settings
# of the two fronts (gRPC, and HTTP: the OpenAI-compatible routes, /health, /metrics), and the
# rendered Envoy config for what the balancing and the routing depend on (the route table is
# read first-match in Python: no Envoy binary runs here); the image, compose and Prometheus
# files are read for the same HTTP port.
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
           "server.kvCacheMemory=-1" "server.httpPort=0" "server.httpPort=65536" "server.metricsPort=9400"; do
  check "schema refuses $bad" "! helm template fs $chart --set '$bad'"
done
check "schema refuses server.gpuMemoryUtilization=1.5" "! helm template fs $chart --set-json server.gpuMemoryUtilization=1.5"
check "the HTTP port on the gRPC port is refused" "! helm template fs $chart --set server.httpPort=50051"
check "render with another HTTP port" 'render port --set server.httpPort=8123 --set metrics.serviceMonitor.enabled=true'
check "that rendering is valid" 'valid port'
# What the per-request balancing and the routing depend on, in the Envoy config as rendered, and
# the two fronts' ports, probes and scrapes in the manifests (kubernetes-validate checks their
# shapes; it has no schema for the ServiceMonitor, so its fields are checked only here).
check "rendered manifests: ports, probes, scrapes, Envoy (defaults)" "$tools/bin/python3 scripts/deploy_check_manifests.py $out/defaults.yaml 8000 annotations"
check "... with the ServiceMonitor" "$tools/bin/python3 scripts/deploy_check_manifests.py $out/all.yaml 8000 servicemonitor"
check "... with server.httpPort=8123" "$tools/bin/python3 scripts/deploy_check_manifests.py $out/port.yaml 8123 servicemonitor"
check "... without Envoy" "$tools/bin/python3 scripts/deploy_check_manifests.py $out/bare.yaml 8000 annotations"
# The image, compose and Prometheus (no container engine here: read from the files).
check "image, compose and Prometheus agree on the HTTP port 8000" "$tools/bin/python3 - <<'PY'
import re, yaml
df = open('deploy/docker/Dockerfile').read()
assert re.search(r'^\s*FLASHSERVE_HTTP_PORT=8000\b', df, re.M), 'Dockerfile: ENV FLASHSERVE_HTTP_PORT=8000'
assert 'FLASHSERVE_METRICS_PORT' not in df, 'Dockerfile: no separate metrics port'
expose = re.search(r'^EXPOSE (.*)$', df, re.M).group(1).split()
assert sorted(expose) == ['50051', '8000'], expose
svc = yaml.safe_load(open('deploy/docker/compose.yaml'))['services']['flashserve']
assert str(svc['environment']['FLASHSERVE_HTTP_PORT']) == '8000', svc['environment']
assert '127.0.0.1:8000:8000' in svc['ports'] and '127.0.0.1:50051:50051' in svc['ports'], svc['ports']
assert not any('9400' in p for p in svc['ports']), svc['ports']
prom = yaml.safe_load(open('deploy/prometheus/prometheus.yml'))
job = next(j for j in prom['scrape_configs'] if j['job_name'] == 'flashserve')
assert job['metrics_path'] == '/metrics' and job['static_configs'][0]['targets'] == ['flashserve:8000'], job
PY"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
