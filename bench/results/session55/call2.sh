#!/usr/bin/env bash
# Session 55 call 2 (issue 22): session 54's table.sh (the table beside cuDNN, FA3 and FlashInfer
# in one call, ~8 min) on the candidate v4.40 (whose eager calls, the ones the table times, walk
# as v4.39's: the change is the captured calls' walk). Carry build-s55p, .whl/fa3, .whl/fi.
B=${B:-build-s55a}
[ -d "$B" ] || tar xJf build-s55p/b.tar.xz
B=$B bash bench/results/session54/table.sh
