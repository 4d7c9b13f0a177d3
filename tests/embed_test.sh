#!/usr/bin/env bash
# The installed package: `cmake --install` into a temporary prefix, then examples/embed (C and
# C++ consumers) built with find_package(flashserve CONFIG) and run, and the C example built
# again with pkg-config. Prints "N passed, N failed".
set -u
build=$1 src=$2
prefix=$(mktemp -d) out=$(mktemp -d)
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }
check "cmake --install" 'cmake --install "$build" --prefix "$prefix" >/dev/null'
check "find_package(flashserve) configures and builds the examples" \
  'cmake -S "$src/examples/embed" -B "$out/b" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null && cmake --build "$out/b" >/dev/null'
check "the C consumer runs" 'LD_LIBRARY_PATH="$prefix/lib" "$out/b/embed_c" | grep -q "decode through the C ABI ok"'
check "the C++ consumer runs" '"$out/b/embed_cpp" | grep -q "prefill through the C++ API ok"'
check "pkg-config builds the C consumer" \
  'PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cc -std=c99 "$src/examples/embed/embed_c.c" $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs flashserve) -lm -o "$out/pc" && LD_LIBRARY_PATH="$prefix/lib" "$out/pc" >/dev/null'
rm -rf "$prefix" "$out"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
