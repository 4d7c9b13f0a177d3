#!/usr/bin/env bash
# The sanitizer job (issue 24), run by scripts/test.sh after the main suite: the CPU tree built
# with AddressSanitizer (LeakSanitizer on) and UndefinedBehaviorSanitizer into build-asan/
# (-DFLASHSERVE_SANITIZE=ON, no CUDA), then the CPU suite there, the gRPC server tests and the
# real server process included, and the fuzz targets for FLASHSERVE_FUZZ_SECONDS each. Any
# report fails the test that made it (UBSan does not recover; ASan and LSan exit non-zero).
# Left out, by name: what does not run an instrumented binary (Python loads the library into
# an uninstrumented interpreter; the package test builds a consumer without the sanitizers; the
# deploy check runs helm), the four slowest model-scale tests (about 10 minutes under the
# sanitizers on 2 cores; the same code paths run on the tiny model in the tests kept), and the
# CPU prefill grid's shapes (627 s of the 1100 s the suite took here under the sanitizers; the
# same kernels run in PrefillOptions and PrefillCpu: packed, paged, every mask option). The
# OpenAI front's tests on SmolLM2 run here (Server.OpenAi*: 32 s, 22 s and 44 s under the
# sanitizers on 2 cores; the server's exit, leaks checked, is one of their checks).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths and the working directory out of ccache's keys, so a fresh clone reuses its objects.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=OFF -DFLASHSERVE_SANITIZE=ON \
  -DFLASHSERVE_BUILD_BENCH=OFF -DFLASHSERVE_FUZZ_SECONDS="${FLASHSERVE_FUZZ_SECONDS:-20}" >/dev/null
cmake --build build-asan --parallel "${FLASHSERVE_BUILD_JOBS:-2}"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
slow='^(GgufSmolLM2\.GreedyMatchesTransformers|Tokenizer\.HfExact\.(vocabs|synthetic)|Server\.ChatWithSmolLM2|Grid/PrefillGrid\..*)$'
other='^(Python\..*|Package\.InstallAndEmbed|Deploy\.Validate)$'
cd build-asan
ctest --output-on-failure --timeout 900 -j "${FLASHSERVE_TEST_JOBS:-2}" -L cpu -E "$slow|$other"
