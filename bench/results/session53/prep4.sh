#!/usr/bin/env bash
# Call 4's carry: build-s53w/b.tar.xz (unpacks to build-s53c/: the tree's library and GPU tests
# with the static walk over WsVarlenOrder), beside build-s53z (prep3.sh: the kernels before it).
exec bash "$(dirname "$0")/../../build_pack.sh" build-s53c build-s53w
