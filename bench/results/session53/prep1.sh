#!/usr/bin/env bash
# Calls 1-2's carry: build-s53y/b.tar.xz (unpacks to build-s53/: the tree's library and GPU tests,
# v4.37's kernels at ba2cf7e), beside .whl/fa3 and .whl/fi (scripts/gpu_peers.sh prepare,
# prepare-flashinfer; ~38 MB together).
exec bash "$(dirname "$0")/../../build_pack.sh" build-s53 build-s53y
