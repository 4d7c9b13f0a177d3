#!/usr/bin/env bash
# The bearer token from a file (issue 24, point 16): --auth-token-file (and its twin
# FLASHSERVE_AUTH_TOKEN_FILE) takes the token from a file, so it is not in /proc/PID/cmdline
# where every local user can read it; the right token is served, a wrong one UNAUTHENTICATED; a
# missing or empty file, or both --auth-token and --auth-token-file, are refused before the
# server listens. Then owners (issue 24, points 12 and 14): one tenant token a line in the file
# (a token twice refused), --admin-token-file / FLASHSERVE_ADMIN_TOKEN_FILE (one token, not a
# tenant's), and --prefix-cache-isolation / FLASHSERVE_PREFIX_CACHE_ISOLATION: with identity,
# tenant B sending tenant A's prompt has 0 prompt tokens cached, with none (the default) it has
# A's. Usage: server_auth_test.sh SERVER CLI. Prints "N passed, N failed".
set -u
server=$1 cli=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }
token="t0ken-$RANDOM$RANDOM"
printf '%s\n' "$token" >"$tmp/token"
chmod 600 "$tmp/token"

# serve ENV... -- ARGS...: starts the server (pid in $pid, port in $port) and waits for "ready".
serve() {
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  : >"$tmp/out"
  env "${envs[@]}" "$server" --port 0 --metrics-port -1 --http-port -1 "$@" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  port=""
  for _ in $(seq 200); do
    port=$(grep -oE 'listening on 127.0.0.1:[0-9]+' "$tmp/out" | grep -oE '[0-9]+$')
    [ -n "$port" ] && grep -q '^ready$' "$tmp/out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
}
stop() { kill -TERM "$pid" 2>/dev/null; wait "$pid"; }

for how in flag env; do
  if [ "$how" = flag ]; then serve -- --auth-token-file "$tmp/token"; else serve FLASHSERVE_AUTH_TOKEN_FILE="$tmp/token" --; fi
  check "$how: the server starts with the token file" 'grep -q "^ready$" "$tmp/out"'
  check "$how: the token is not on its command line" '[ -r /proc/$pid/cmdline ] && ! tr "\0" " " </proc/$pid/cmdline | grep -q "$token"'
  ok=$("$cli" --target "127.0.0.1:$port" --tokens 5,6,7 --max-tokens 2 --auth-token "$token" 2>&1)
  check "$how: the token from the file is accepted" 'echo "$ok" | grep -q "FINISH_REASON_LENGTH"'
  bad=$("$cli" --target "127.0.0.1:$port" --tokens 5,6,7 --max-tokens 2 --auth-token "${token}x" 2>&1)
  check "$how: a wrong token is UNAUTHENTICATED" 'echo "$bad" | grep -q "error 16"'
  none=$("$cli" --target "127.0.0.1:$port" --tokens 5,6,7 --max-tokens 2 2>&1)
  check "$how: no token is UNAUTHENTICATED" 'echo "$none" | grep -q "error 16"'
  stop
done

# refused WHAT NAME ENV... -- ARGS...: exits non-zero without listening and says NAME.
refused() {
  local what=$1 name=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 10 "$server" --port 0 --metrics-port -1 --http-port -1 "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  check "$what: refused (rc $rc)" '[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && ! grep -q "listening on" "$tmp/out"'
  check "$what: the refusal names $name" 'grep -q -- "$name" "$tmp/err"'
}
: >"$tmp/empty"
printf 'a\nb\n' >"$tmp/two"
printf 'a\nb\na\n' >"$tmp/repeat"
printf '\n\n' >"$tmp/blank"
refused "a missing file" "$tmp/nope" -- --auth-token-file "$tmp/nope"
refused "an empty file" "holds no token" -- --auth-token-file "$tmp/empty"
refused "only empty lines" "holds no token" -- --auth-token-file "$tmp/blank"
refused "a token twice" "line 3 repeats an earlier token" -- --auth-token-file "$tmp/repeat"
refused "an empty admin file" "--admin-token-file: .* holds no token" -- --admin-token-file "$tmp/empty"
refused "two admin tokens" "--admin-token-file: .* holds more than one token" -- --admin-token-file "$tmp/two"
printf 'a\n' >"$tmp/a"
printf 'b\n' >"$tmp/b"
refused "the admin token a tenant's" "also a tenant token" -- --auth-token-file "$tmp/two" --admin-token-file "$tmp/a"
refused "the admin token a tenant's (line 2)" "also a tenant token" -- --auth-token-file "$tmp/two" --admin-token-file "$tmp/b"
refused "the admin token the --auth-token" "also a tenant token" -- --auth-token a --admin-token-file "$tmp/a"
refused "--prefix-cache-isolation bogus" "--prefix-cache-isolation" -- --prefix-cache-isolation bogus
refused "FLASHSERVE_PREFIX_CACHE_ISOLATION=token" "--prefix-cache-isolation" FLASHSERVE_PREFIX_CACHE_ISOLATION=token --
refused "--auth-token and --auth-token-file" "--auth-token" -- --auth-token x --auth-token-file "$tmp/token"
refused "FLASHSERVE_AUTH_TOKEN and --auth-token-file" "--auth-token" FLASHSERVE_AUTH_TOKEN=x -- --auth-token-file "$tmp/token"

# Tenants: one token a line (CRLF and empty lines taken), each served; the admin token too.
ta="tenant-a-$RANDOM" tb="tenant-b-$RANDOM" ad="admin-$RANDOM"
printf '%s\r\n\n%s\n' "$ta" "$tb" >"$tmp/tenants"
printf '%s\n' "$ad" >"$tmp/admin"
prompt=$(seq -s, 10 57)  # 48 tokens: 3 blocks of 16
gen() { "$cli" --target "127.0.0.1:$port" --tokens "$prompt" --max-tokens 2 --auth-token "$1" 2>&1; }
cached() { echo "$1" | grep -oE '[0-9]+ prompt tokens cached' | grep -oE '^[0-9]+'; }
for how in flag env; do
  if [ "$how" = flag ]; then
    serve -- --auth-token-file "$tmp/tenants" --admin-token-file "$tmp/admin" --prefix-cache-isolation identity
  else
    serve FLASHSERVE_AUTH_TOKEN_FILE="$tmp/tenants" FLASHSERVE_ADMIN_TOKEN_FILE="$tmp/admin" \
      FLASHSERVE_PREFIX_CACHE_ISOLATION=identity --
  fi
  check "$how: serves with tenants, admin and isolation" 'grep -q "^ready$" "$tmp/out"'
  a1=$(gen "$ta") a2=$(gen "$ta") b1=$(gen "$tb") ad1=$(gen "$ad") wrong=$(gen "${ta}x")
  check "$how: tenant A served" 'echo "$a1" | grep -q FINISH_REASON_LENGTH'
  check "$how: A's second request reuses A's prefix" '[ "$(cached "$a2")" -gt 0 ]'
  check "$how: tenant B served, 0 of A's prompt cached" 'echo "$b1" | grep -q FINISH_REASON_LENGTH && [ "$(cached "$b1")" = 0 ]'
  check "$how: the admin served, 0 cached" 'echo "$ad1" | grep -q FINISH_REASON_LENGTH && [ "$(cached "$ad1")" = 0 ]'
  check "$how: another token is UNAUTHENTICATED" 'echo "$wrong" | grep -q "error 16"'
  stop
done
serve -- --auth-token-file "$tmp/tenants"  # shared: the default
a1=$(gen "$ta") b1=$(gen "$tb")
check "shared: tenant B reuses A's prefix" 'echo "$b1" | grep -q FINISH_REASON_LENGTH && [ "$(cached "$b1")" -gt 0 ]'
stop
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
