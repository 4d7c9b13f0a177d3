"""One row of the step-phase table (gpu_serve_check.sh): the step thread's time a step by phase
(schedule, build, forward, deliver; microseconds) between two scrapes of /metrics' step counters,
of forward the part in the model's begin_step (the host's work for the step on a GPU), then the
device's view of a step where the model times it (idle, prepare, run: microseconds a
timed step; blank otherwise).
Usage: step_phases.py NAME CONCURRENCY AFTER_FILE [BEFORE_TEXT]"""
import re
import sys


def parse(text):
    d = {}
    for line in text.splitlines():
        m = re.match(r'flashserve:step_seconds_total\{phase="(\w+)"\} (\S+)', line)
        if m:
            d[m.group(1)] = float(m.group(2))
        m = re.match(r'flashserve:step_begin_seconds_total (\S+)', line)
        if m:
            d["begin"] = float(m.group(1))
        m = re.match(r'flashserve:steps_total (\S+)', line)
        if m:
            d["steps"] = float(m.group(1))
        m = re.match(r'flashserve:step_device_seconds_total\{part="(\w+)"\} (\S+)', line)
        if m:
            d["device_" + m.group(1)] = float(m.group(2))
        m = re.match(r'flashserve:device_timed_steps_total (\S+)', line)
        if m:
            d["device_steps"] = float(m.group(1))
    return d


name, c, path = sys.argv[1:4]
before = sys.argv[4] if len(sys.argv) > 4 else ""
a, b = parse(open(path).read()), parse(before)
steps = a.get("steps", 0) - b.get("steps", 0)
if steps <= 0:
    print(f"| {name} | {c} | no steps | | | | | | | | |")
    sys.exit(0)
us = [1e6 * (a.get(k, 0) - b.get(k, 0)) / steps for k in ("schedule", "build", "forward", "begin", "deliver")]
timed = a.get("device_steps", 0) - b.get("device_steps", 0)
device = [f"{1e6 * (a.get(k, 0) - b.get(k, 0)) / timed:.0f}" if timed > 0 else ""
          for k in ("device_idle", "device_prepare", "device_run")]
print(f"| {name} | {c} | {steps:.0f} | " + " | ".join(f"{x:.0f}" for x in us) + " | " + " | ".join(device) + " |")
