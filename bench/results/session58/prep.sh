#!/usr/bin/env bash
# Session 58's carry (issue 22), here, ~1 min where build-s57b exists (else session57/prep1.sh
# first, ~9 min): the tree's build (prefill v4.41 and test_prefill_cuda with CapturedStaticWalk)
# into build-s58b/, with session 57's three bench-only variants (serial/, serial128/, nohalf128/:
# libraries and their test_prefill_cuda, built by session57/prep1.sh from the tree at 4935db9,
# whose kernels and host code behave as this tree's), packed as build-s58q/b.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -d build-s57b/serial ] || bash bench/results/session57/prep1.sh
bash bench/build_pack.sh build-s58b build-s58q
cp -r build-s57b/serial build-s57b/serial128 build-s57b/nohalf128 build-s58b/
for v in serial serial128 nohalf128; do
  echo "$v: $(diff <(python3 bench/sass_loops.py build-s58b/libflashserve_c.so --md5 | grep prefill | sort) \
    <(python3 bench/sass_loops.py "build-s58b/$v/libflashserve_c.so" --md5 | grep prefill | sort) | grep -c '^<') kernels differ from the tree's"
done
rm -rf build-s58q && mkdir build-s58q && tar cJf build-s58q/b.tar.xz build-s58b
du -sh build-s58b build-s58q
