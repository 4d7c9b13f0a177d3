"""Checks a `helm template` rendering of deploy/helm/flashserve (release fs, namespace serving)
for what the two fronts depend on; scripts/deploy_check.sh runs it over several value sets.

  python3 deploy_check_manifests.py RENDERED.yaml HTTP_PORT annotations|servicemonitor

- the server container: gRPC 50051 and HTTP HTTP_PORT ports, FLASHSERVE_HTTP_PORT set and no
  separate metrics port, readiness GET /health on the HTTP port, startup and liveness on gRPC
  health, the GPU and /dev/shm;
- the Services: the normal one has the http port, the headless one only gRPC;
- the scrape: pod annotations on the HTTP port, or (servicemonitor) a ServiceMonitor whose
  selector finds exactly one Service with an http port (so each pod is scraped once);
- Envoy, when rendered: the gRPC cluster (HTTP/2, gRPC health checks, the headless Service on
  50051) and the HTTP cluster (HTTP/1.1, GET /health checks, the headless Service on HTTP_PORT),
  and the route table read first-match as Envoy reads it: /v1/*, /tokenize and /detokenize to
  the HTTP cluster, gRPC calls to the gRPC cluster, /health and /metrics to nothing.
Exits non-zero with the failed assertion.
"""
import re
import sys

import yaml

path, http_port, scrape = sys.argv[1], int(sys.argv[2]), sys.argv[3]
docs = [d for d in yaml.safe_load_all(open(path)) if d]


def one(kind, name):
    found = [d for d in docs if d['kind'] == kind and d['metadata']['name'] == name]
    assert len(found) == 1, f'{kind} {name}: {len(found)} found'
    return found[0]


# The server container.
dep = one('Deployment', 'fs-flashserve')
pod = dep['spec']['template']
c = pod['spec']['containers'][0]
ports = {p['name']: p['containerPort'] for p in c['ports']}
assert ports == {'grpc': 50051, 'http': http_port}, ports
env = {e['name']: e.get('value') for e in c['env']}
assert env.get('FLASHSERVE_HTTP_PORT') == str(http_port), env
assert env.get('FLASHSERVE_PORT') == '50051', env
assert 'FLASHSERVE_METRICS_PORT' not in env, 'the separate metrics listener stays off'


def port_of(probe_port):  # a probe's port: a number or a container port's name
    return ports[probe_port] if isinstance(probe_port, str) else probe_port


ready = c['readinessProbe']
assert set(ready) >= {'httpGet'} and 'grpc' not in ready, ready
assert ready['httpGet']['path'] == '/health' and port_of(ready['httpGet']['port']) == http_port, ready
assert ready['httpGet'].get('scheme', 'HTTP') == 'HTTP', ready
for name in ('startupProbe', 'livenessProbe'):
    assert port_of(c[name]['grpc']['port']) == 50051, (name, c[name])
assert c['resources']['limits']['nvidia.com/gpu'] == 1
assert any(v['name'] == 'dshm' and v['emptyDir']['medium'] == 'Memory' for v in pod['spec']['volumes'])

# The Services.
svc = one('Service', 'fs-flashserve')
svc_ports = {p['name']: (p['port'], p['targetPort']) for p in svc['spec']['ports']}
assert svc_ports == {'grpc': (50051, 'grpc'), 'http': (http_port, 'http')}, svc_ports
headless = one('Service', 'fs-flashserve-headless')
assert headless['spec']['clusterIP'] == 'None'
assert [p['name'] for p in headless['spec']['ports']] == ['grpc'], headless['spec']['ports']
for s in (svc, headless):  # both select the server pods
    assert all(pod['metadata']['labels'].get(k) == v for k, v in s['spec']['selector'].items()), s['spec']

# The scrape.
annotations = pod['metadata'].get('annotations', {})
monitors = [d for d in docs if d['kind'] == 'ServiceMonitor']
if scrape == 'annotations':
    assert not monitors
    assert annotations.get('prometheus.io/scrape') == 'true', annotations
    assert annotations.get('prometheus.io/port') == str(http_port), annotations
    assert annotations.get('prometheus.io/path') == '/metrics', annotations
else:
    assert 'prometheus.io/scrape' not in annotations, 'scraped twice: annotations and the ServiceMonitor'
    assert len(monitors) == 1, monitors
    sm = monitors[0]
    (ep,) = sm['spec']['endpoints']
    assert ep['port'] == 'http' and ep['path'] == '/metrics', ep
    wanted = sm['spec']['selector']['matchLabels']
    selected = [d for d in docs if d['kind'] == 'Service'
                and all(d['metadata'].get('labels', {}).get(k) == v for k, v in wanted.items())]
    with_port = [d['metadata']['name'] for d in selected if any(p['name'] == ep['port'] for p in d['spec']['ports'])]
    assert with_port == ['fs-flashserve'], f'the ServiceMonitor scrapes through {with_port}'

# Envoy.
cms = [d for d in docs if d['kind'] == 'ConfigMap' and d['metadata']['name'] == 'fs-flashserve-envoy']
if cms:
    envoy = yaml.safe_load(cms[0]['data']['envoy.yaml'])
    clusters = {cl['name']: cl for cl in envoy['static_resources']['clusters']}
    assert set(clusters) == {'flashserve', 'flashserve_http'}, set(clusters)

    def upstream(cl):
        opts = cl['typed_extension_protocol_options']['envoy.extensions.upstreams.http.v3.HttpProtocolOptions']
        return opts['explicit_http_config']

    def address(cl):
        return cl['load_assignment']['endpoints'][0]['lb_endpoints'][0]['endpoint']['address']['socket_address']

    for cl, port in ((clusters['flashserve'], 50051), (clusters['flashserve_http'], http_port)):
        assert cl['type'] == 'STRICT_DNS' and cl['lb_policy'] in ('LEAST_REQUEST', 'ROUND_ROBIN'), cl
        assert cl['load_assignment']['cluster_name'] == cl['name'], cl['load_assignment']
        assert address(cl)['address'] == 'fs-flashserve-headless', address(cl)
        assert int(address(cl)['port_value']) == port, (cl['name'], address(cl))
        hc = cl['health_checks'][0]
        assert re.fullmatch(r'[0-9]+([.][0-9]+)?s', hc['interval']), hc
    g = clusters['flashserve']
    assert 'http2_protocol_options' in upstream(g), 'upstream must be HTTP/2 (gRPC)'
    assert g['health_checks'][0]['grpc_health_check']['service_name'] == 'flashserve.v1.Generation'
    h = clusters['flashserve_http']
    assert 'http_protocol_options' in upstream(h) and 'http2_protocol_options' not in upstream(h), \
        'the HTTP front speaks HTTP/1.1 only'
    assert h['health_checks'][0]['http_health_check']['path'] == '/health', h['health_checks']

    (listener,) = envoy['static_resources']['listeners']
    hcm = listener['filter_chains'][0]['filters'][0]['typed_config']
    assert hcm['codec_type'] == 'AUTO', 'HTTP/1.1 (OpenAI clients) and HTTP/2 (gRPC) in'
    (vhost,) = hcm['route_config']['virtual_hosts']

    def matches(m, path, grpc):
        if 'grpc' in m and not grpc:  # Envoy: content-type application/grpc
            return False
        if 'prefix' in m:
            return path.startswith(m['prefix'])
        if 'path' in m:
            return path == m['path']
        if 'safe_regex' in m:
            return re.fullmatch(m['safe_regex']['regex'], path) is not None
        raise AssertionError(f'a match this check does not read: {m}')

    def route(path, grpc):  # the first route that matches, as Envoy picks it; None: 404
        for r in vhost['routes']:
            if matches(r['match'], path.split('?')[0], grpc):
                return r['route']['cluster']
        return None

    for p in ('/v1/completions', '/v1/chat/completions', '/v1/models', '/tokenize', '/detokenize',
              '/v1/completions?x=1'):
        assert route(p, grpc=False) == 'flashserve_http', (p, route(p, False))
    for p in ('/flashserve.v1.Generation/Generate', '/grpc.health.v1.Health/Check', '/flashserve.v1.Generation/Tokenize'):
        assert route(p, grpc=True) == 'flashserve', (p, route(p, True))
    for p in ('/health', '/metrics', '/', '/v1', '/tokenizer'):
        assert route(p, grpc=False) is None, (p, route(p, False))
    for r in vhost['routes']:
        assert r['route'].get('timeout') == '0s', ('streams must not time out', r)
print('ok')
