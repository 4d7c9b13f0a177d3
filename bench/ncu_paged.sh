#!/usr/bin/env bash
# Hardware counters of the warp-specialized kernel on the chunked row (2k new tokens over a 30k
# cached prefix, causal, d 128, 128-key tiles), packed and by the row gather over pages of 16
# and 64 tokens. A diagnostic for the paged gap (bench/history/prefill.md, "prefill v4.4"; TMA
# page boxes and the older gather went in v4.23). Usage: bash bench/ncu_paged.sh OUTDIR
# SHAPE (profile_prefill's flags) and BLOCK_N (128 or 176) pick another row, e.g. session 39's
# 176-key gap: SHAPE="--batch 1 --len 16384 --causal" BLOCK_N=176; LIB another library.
set -uo pipefail
cd "$(dirname "$0")/.."
out="$1"
command -v ncu >/dev/null || { echo "ncu_paged: no ncu here"; exit 0; }
shape=${SHAPE:-"--batch 1 --len 2048 --prefix 30720 --causal"}
lib=${LIB:-build-gpu/libflashserve_c.so}
for v in packed:0 rows16:16 rows64:64; do
  IFS=: read -r name bs <<<"$v"
  FLASHSERVE_PREFILL_KERNEL=ws FLASHSERVE_PREFILL_WS_BLOCK_N=${BLOCK_N:-128} \
    timeout 150 ncu --clock-control none -k "regex:prefill_sm90_ws" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --metrics lts__t_sectors_op_read.sum,lts__t_sector_hit_rate.pct,l1tex__m_xbar2l1tex_read_bytes.sum,smsp__cycles_active.avg \
    python3 bench/profile_prefill.py --lib "$lib" $shape --paged "$bs" > "$out/ncu_paged_$name.txt" 2>&1
  echo "== $name"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|L1/TEX Hit|L2 Cache Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|lts__t_sectors_op_read|xbar2l1tex" "$out/ncu_paged_$name.txt" | head -14
done
