"""The persistent walk's schedule on paper (session 48, no GPU): items in WsWorkOrder's order
(sections of `section` (query head, sequence) pairs, in a section the q tiles longest first),
each costing its key tiles plus B tiles for the item boundary, claimed by the first free SM of
132. Prints the makespan against the even spread (sum / SMs) and the useful share (the tiles
alone over the makespan): what wave quantization and the boundary cost each row before any
tile runs slower. Sections as ws_section (prefill_cuda.cu) picks them at the 32 MiB budget."""
import heapq
import math


def simulate(heads, seqs, seq_len, block_m, block_n, causal, section, boundary, sms=132):
    num_m = math.ceil(seq_len / block_m)
    pairs = heads * seqs
    items = []
    for first in range(0, pairs, section):
        n = min(section, pairs - first)
        for within in range(n * num_m):
            m = num_m - 1 - within // n
            keys = min(seq_len, (m + 1) * block_m) if causal else seq_len
            items.append(math.ceil(keys / block_n) + boundary)
    free = [0.0] * sms
    for cost in items:
        heapq.heappush(free, heapq.heappop(free) + cost)
    makespan = max(free)
    tiles = sum(items) - boundary * len(items)
    return makespan, sum(items) / sms, tiles / sms / makespan


ROWS = [  # name, heads (hidden 2048), sequences, length, tile rows, key tile, causal, section
    ("d256 1x16k causal", 8, 1, 16384, 128, 80, True, 2),
    ("d256 1x16k", 8, 1, 16384, 128, 80, False, 1),
    ("d128 1x16k causal", 16, 1, 16384, 128, 176, True, 4),
    ("d128 4x4k", 16, 4, 4096, 128, 128, False, 1),
    ("d128 16x1k", 16, 16, 1024, 128, 128, False, 1),
    ("d128 16x1k causal", 16, 16, 1024, 128, 128, True, 64),
    ("d64 1x16k causal", 32, 1, 16384, 192, 128, True, 8),
    ("d64 4x4k causal", 32, 4, 4096, 128, 128, True, 32),
    ("d64 16x1k", 32, 16, 1024, 128, 128, False, 1),
    ("d64 16x1k causal", 32, 16, 1024, 128, 128, True, 64),
]

if __name__ == "__main__":
    print(f"{'row':<20}" + "".join(f"  B={b}: makespan / even, useful" for b in (0, 0.5, 1, 2)))
    for name, *args in ROWS:
        cells = []
        for b in (0, 0.5, 1, 2):
            mk, even, useful = simulate(*args, boundary=b)
            cells.append(f"  {mk:7.0f} / {even:7.0f}, {useful:.3f}   ")
        print(f"{name:<20}" + "".join(cells))
