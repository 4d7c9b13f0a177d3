#!/usr/bin/env bash
# Session 44 call 2b: call2.sh without the knobs and racecheck (SLIM=1), for the device time left
# after refused starts.
SLIM=1 bash bench/results/session44/call2.sh
