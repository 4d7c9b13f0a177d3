#!/usr/bin/env bash
# Session 40's fourteenth call (issue 22), carry build-s40i: v4.31's test_prefill_cuda (its kernels
# are call 13's, md5) under compute-sanitizer, the ws kernels alone instrumented: the packed
# instances' shared memory moved (three stages at d 128's 128 keys, one Q slot, no O buffer; no
# row slots, so the dynamic walk's slots and the sequence cache start 1056 bytes earlier).
# memcheck over grid cases 9 and 21 (d 64 / d 128 causal, packed) and MaskOptions' first case,
# synccheck over 21, racecheck over 21 and 9.
B=build-s40i
source bench/results/call_prologue.sh
G=Gpu/PrefillCudaGrid.MatchesReferenceAndCpu
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 100 $B/test_prefill_cuda "$G/9:$G/21"
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 60 $B/test_prefill_cuda "$G/21"
for c in 21 9; do SAN_KERNELS=prefill_sm90_ws sanitize racecheck 70 $B/test_prefill_cuda "$G/$c" "race$c"; done
