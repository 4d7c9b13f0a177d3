#!/usr/bin/env bash
# TLS start-up errors name the file and the reason (issue 24, the smaller ones): a key that does
# not match the certificate used to log only "cannot listen on 127.0.0.1:P", and one of
# --tls-cert/--tls-key alone "cannot read " with an empty path. Each case must exit 1 without
# listening and say which flag, which file and why; a matching pair still serves.
# Usage: server_tls_test.sh SERVER. Prints "N passed, N failed".
set -u
server=$1
command -v openssl >/dev/null 2>&1 || { echo "no openssl to make a certificate: skipped"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }
mkcert() {  # mkcert NAME: NAME.crt and NAME.key, a self-signed pair
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout "$tmp/$1.key" \
    -out "$tmp/$1.crt" >/dev/null 2>&1
}
mkcert a && mkcert b || { echo "FAILED: openssl could not make certificates"; exit 1; }
echo "not a certificate" >"$tmp/junk.pem"

# refused WHAT ENV... -- ARGS... -- NEEDLE...: exit 1, no "listening on", stderr has every NEEDLE
# and no "cannot read" with nothing after it.
refused() {
  local what=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 10 "$server" --port 0 --metrics-port -1 --http-port -1 "${args[@]}" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  check "$what: exit 1 (rc $rc)" '[ "$rc" -eq 1 ] && ! grep -q "listening on" "$tmp/out"'
  for needle in "$@"; do check "$what: says '$needle'" 'grep -qF -- "$needle" "$tmp/err"'; done
  check "$what: no empty path" '! grep -qE "cannot read *(:|$)" "$tmp/err"'
  check "$what: not 'cannot listen'" '! grep -q "cannot listen" "$tmp/err"'
}
refused "--tls-cert alone" -- --tls-cert "$tmp/a.crt" -- "--tls-cert $tmp/a.crt is set but --tls-key is not"
refused "--tls-key alone" -- --tls-key "$tmp/a.key" -- "--tls-key $tmp/a.key is set but --tls-cert is not"
refused "FLASHSERVE_TLS_CERT alone" FLASHSERVE_TLS_CERT="$tmp/a.crt" -- -- "but --tls-key is not"
refused "a missing certificate" -- --tls-cert "$tmp/nope.crt" --tls-key "$tmp/a.key" -- \
  "--tls-cert: cannot read $tmp/nope.crt: No such file or directory"
refused "a missing key" -- --tls-cert "$tmp/a.crt" --tls-key "$tmp/nope.key" -- \
  "--tls-key: cannot read $tmp/nope.key: No such file or directory"
refused "a certificate that is not PEM" -- --tls-cert "$tmp/junk.pem" --tls-key "$tmp/a.key" -- \
  "--tls-cert: $tmp/junk.pem holds no PEM certificate"
refused "a key that is not PEM" -- --tls-cert "$tmp/a.crt" --tls-key "$tmp/junk.pem" -- \
  "--tls-key: $tmp/junk.pem holds no unencrypted PEM private key"
refused "the key of another certificate" -- --tls-cert "$tmp/a.crt" --tls-key "$tmp/b.key" -- \
  "--tls-key: the key in $tmp/b.key does not match the certificate in $tmp/a.crt"

# A matching pair serves, and SIGTERM still exits 0.
"$server" --port 0 --metrics-port -1 --http-port -1 --tls-cert "$tmp/a.crt" --tls-key "$tmp/a.key" >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 200); do grep -q '^ready$' "$tmp/out" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
check "a matching pair: ready" 'grep -q "^ready$" "$tmp/out"'
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
check "a matching pair: SIGTERM exits 0 (rc $rc)" '[ "$rc" -eq 0 ]'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
