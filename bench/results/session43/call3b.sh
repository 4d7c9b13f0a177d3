#!/usr/bin/env bash
# Session 43 call 3b: call3.sh with SLIM=1 (no racecheck, shorter sanitizer runs: the device time left).
SLIM=1 bash bench/results/session43/call3.sh
