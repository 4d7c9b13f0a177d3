#!/usr/bin/env bash
# Call 4's carry: build-s54p/b.tar.xz (unpacks to build-s54z/: the tree's library and GPU tests
# with the zigzag static walk).
exec bash "$(dirname "$0")/../../build_pack.sh" build-s54z build-s54p
