#!/usr/bin/env bash
# Call 3's carry: build-s53z/b.tar.xz (unpacks to build-s53b/: the tree's library and GPU tests with
# the captured calls' new walk rule; v4.37's kernels).
exec bash "$(dirname "$0")/../../build_pack.sh" build-s53b build-s53z
