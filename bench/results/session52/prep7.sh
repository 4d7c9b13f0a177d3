#!/usr/bin/env bash
# Call 7's carry: build-s52y/b.tar.xz, which unpacks to build-s52/: the tree's library and GPU tests
# (v4.37's kernels; the host's rule: captured packed calls of differing q lengths on the static
# persistent walk).
exec bash "$(dirname "$0")/../../build_pack.sh" build-s52 build-s52y
