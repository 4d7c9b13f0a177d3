#!/usr/bin/env bash
# Session 58, call 3 (issue 22), on an H200 only (the table; none since session 46): carry
# build-s58q, .whl/fa3, .whl/fi; session54/table.sh on this session's build, ~8 min.
[ -d build-s58b ] || tar xJf build-s58q/b.tar.xz
B=build-s58b bash bench/results/session54/table.sh
