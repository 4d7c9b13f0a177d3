"""The loops of a CUDA object's SASS (a backward branch and its target) and their instructions by
opcode: how a change moves a kernel's inner loops, read here without a GPU (e.g. the FP8
producer's tile loop, bench/history/prefill.md "Session 35"). `--md5` prints the md5 of each
function's instruction stream instead (addresses and encodings left out: a switch that must not
change main's code, checked).
Usage: python3 bench/sass_loops.py OBJ_OR_SASS [--min N] [--md5]   (cuobjdump: bench/sass_tools.sh)"""
import argparse
import collections
import hashlib
import re
import subprocess

INS = re.compile(r"\s+/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;")


def functions(path):
    text = open(path).read() if path.endswith(".sass") else subprocess.run(
        ["cuobjdump", "-sass", path], check=True, capture_output=True, text=True).stdout
    for chunk in re.split(r"\t+Function : ", text)[1:]:
        name = chunk.split("\n", 1)[0].strip()
        yield name, [(int(m.group(1), 16), m.group(2)) for m in map(INS.match, chunk.split("\n")) if m]


def opcode(text):
    return re.sub(r"^@!?U?P[0-9T]\s+", "", text).split()[0].split(".")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--min", type=int, default=50, help="loops of fewer instructions left out")
    ap.add_argument("--md5", action="store_true")
    args = ap.parse_args()
    for name, ins in functions(args.path):
        if args.md5:
            print(hashlib.md5("\n".join(t for _, t in ins).encode()).hexdigest(), len(ins), name)
            continue
        print(f"{name}: {len(ins)} instructions")
        at = {a: i for i, (a, _) in enumerate(ins)}
        for i, (a, t) in enumerate(ins):
            m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", t)
            if not m or int(m.group(1), 16) > a or int(m.group(1), 16) not in at:
                continue
            s = at[int(m.group(1), 16)]
            if i - s + 1 < args.min:
                continue
            ops = collections.Counter(opcode(t) for _, t in ins[s:i + 1])
            print(f"  loop {ins[s][0]:05x}-{a:05x}: {i - s + 1} instructions; " +
                  ", ".join(f"{k} {v}" for k, v in ops.most_common(16)))


if __name__ == "__main__":
    main()
