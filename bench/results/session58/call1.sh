#!/usr/bin/env bash
# Session 58, call 1 (issue 22), carry build-s58q (prep.sh), ~6 min: session57/call5.sh on this
# session's build: the tree's GPU tests (v4.41, CapturedStaticWalk new), the serial variant's
# tests, d 64's rows A/B (default, m128, serial), 6 passes; predictions there.
[ -d build-s58b ] || tar xJf build-s58q/b.tar.xz
B=build-s58b DL=${DL:-585} bash bench/results/session57/call5.sh
