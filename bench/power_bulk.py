"""The board's power while bulk_rate's stretches run (`bulk_rate power SECONDS`: 16 KB TMA boxes on
every SM, alone and multicast to clusters of two, from a pool in the L2 and from one in HBM, then
a spin on every SM as the baseline): nvidia-smi samples SM clock and power every 50 ms; each
stretch's samples (its first 0.4 s and last 0.1 s left out) give its median clock and power, and
(W - W_spin) / (GB/s received) the energy a byte received above the busy-but-idle SMs. The
question (issue 22, session 50): every prefill row runs at the 700 W cap, so what a byte from the
L2 costs says what halving the L2's reads (two CTAs sharing K/V by multicast) could give back to
the clock. No torch; reads clocks only, never sets them.

Usage: python3 bench/power_bulk.py BULK_RATE_BINARY [SECONDS]"""
import datetime
import statistics
import subprocess
import sys
import time


def main():
    binary = sys.argv[1]
    seconds = sys.argv[2] if len(sys.argv) > 2 else "3"
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    run = subprocess.run([binary, "power", seconds], capture_output=True, text=True, check=False)
    time.sleep(0.2)
    smi.terminate()
    out, _ = smi.communicate()
    print(run.stdout + run.stderr, end="")
    samples = []  # (unix seconds, MHz, W)
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((t, float(parts[1]), float(parts[2])))
        except (ValueError, IndexError):
            continue
    begins, rows = {}, []
    for line in run.stdout.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0] == "stretch" and f[2] == "begin":
            begins[f[1]] = float(f[3])
        elif len(f) >= 5 and f[0] == "stretch" and f[2] == "end" and f[1] in begins:
            b, e = begins[f[1]] + 0.4, float(f[3]) - 0.1
            inside = [s for s in samples if b <= s[0] <= e]
            if not inside:
                rows.append((f[1], float(f[4]), float("nan"), float("nan"), 0))
                continue
            rows.append((f[1], float(f[4]), statistics.median(s[1] for s in inside),
                         statistics.median(s[2] for s in inside), len(inside)))
    spin_w = next((r[3] for r in rows if r[0] == "spin"), float("nan"))
    idle = [s[2] for s in samples if s[0] < (min(begins.values()) if begins else 0)]
    print(f"samples {len(samples)}; idle before the stretches {statistics.median(idle) if idle else float('nan'):.0f} W")
    print(f"{'stretch':>12} {'GB/s':>7} {'MHz':>6} {'W':>6} {'n':>4} {'pJ/B over spin':>15}")
    for name, gbps, mhz, w, n in rows:
        pj = (w - spin_w) / gbps * 1e3 if gbps > 0 else float("nan")
        print(f"{name:>12} {gbps:7.0f} {mhz:6.0f} {w:6.0f} {n:4d} {pj:15.2f}")


if __name__ == "__main__":
    main()
