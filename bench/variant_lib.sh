#!/usr/bin/env bash
# An A/B library in seconds: build-gpu's libflashserve_c.so with some of its CUDA objects compiled
# again with extra flags (e.g. -D switches that a patch under test reads), everything else as
# built. The objects' compile commands and the link come from build-gpu's ninja files, so the
# variant differs from build-gpu's library in those objects only (build-gpu must be current).
# Usage: bench/variant_lib.sh NAME "FLAGS" SOURCE.cu... -> build-var/NAME/libflashserve_c.so
#   e.g. bench/variant_lib.sh nobound "-DV420_NO_BOUNDARY" attention/cuda/prefill_sm90_ws_hd128_bf16.cu
# VARIANT_TESTS="test_fp8_cuda ..." also links those test binaries (build-gpu's, built first)
# against the variant's objects -> build-var/NAME/tests/.
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 flags=$2
shift 2
work=build-var/$name/obj
mkdir -p "$work"
cp build-gpu/libflashserve_core.a "$work/core.a"
objs=()
for src in "$@"; do
  obj=CMakeFiles/flashserve_core.dir/$src.o
  cmd=$(ninja -C build-gpu -t commands flashserve_c | grep -E -- "-o $obj( |\$)" | head -1)
  [ -n "$cmd" ] || { echo "variant_lib: no compile command for $src in build-gpu" >&2; exit 1; }
  out=$work/$(basename "$obj")
  cmd=${cmd/-DFLASHSERVE_WITH_CUDA=1/-DFLASHSERVE_WITH_CUDA=1 $flags}
  cmd=$(sed -E "s# -MD -MT [^ ]+ -MF [^ ]+##; s#-o $obj( |\$)#-o $PWD/$out\1#" <<<"$cmd")
  (cd build-gpu && eval "$cmd")
  objs+=("$(basename "$obj")")
done
(cd "$work" && ar r core.a "${objs[@]}")
link=$(ninja -C build-gpu -t commands flashserve_c | tail -1)
link=${link#: && }
link=${link% && :}
link=${link/-o libflashserve_c.so/-o $PWD/build-var/$name/libflashserve_c.so}
link=${link/ libflashserve_core.a / $PWD/$work/core.a }
(cd build-gpu && eval "$link")
ls -la "build-var/$name/libflashserve_c.so"
for t in ${VARIANT_TESTS:-}; do
  mkdir -p "build-var/$name/tests"
  link=$(ninja -C build-gpu -t commands "tests/$t" | tail -1)
  link=${link#: && }
  link=${link%% && cd *}
  link=${link/-o tests\/$t/-o $PWD/build-var/$name/tests/$t}
  link=${link/ libflashserve_core.a / $PWD/$work/core.a }
  (cd build-gpu && eval "$link")
  ls -la "build-var/$name/tests/$t"
done
