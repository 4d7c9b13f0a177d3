#!/usr/bin/env python3
"""Greedy reference tokens for the GGUF model test (tests/test_gguf.cc, GgufSmolLM2.GreedyMatchesTransformers).

Loads SmolLM2-135M-Instruct.Q4_1.gguf with Hugging Face transformers (which dequantizes every
tensor to fp32 with the gguf package and un-permutes Q/K), runs fp32 greedy decoding on the CPU
for a few prompts given as token ids (24 new tokens each, EOS not stopping it), and writes
tests/data/smollm2_greedy.json: the prompts' ids, the expected tokens, the margin between the
top two logits at every step, and a header saying how it was made.

Needs torch, transformers, gguf and accelerate, in a venv outside the repository:
    python3 -m venv ~/.cache/flashserve-ref-venv
    ~/.cache/flashserve-ref-venv/bin/pip install torch transformers gguf accelerate
    ~/.cache/flashserve-ref-venv/bin/python tools/gguf_reference.py [--model FILE] [--out FILE]
"""
import argparse
import hashlib
import json
import os
import platform
import sys

import torch

MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
NEW_TOKENS = 24

# (name, text); the ChatML ones are what SmolLM2's chat template makes of one user turn.
PROMPTS = [
    ("chatml_capital",
     "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"),
    ("chatml_system_haiku",
     "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
     "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n"),
    ("plain_fox", "The quick brown fox jumps over the lazy dog. The"),
    ("plain_code", "def fibonacci(n):\n    "),
    ("plain_long",
     "Gravity is the force by which a planet or other body draws objects toward its center. The force "
     "of gravity keeps all of the planets in orbit around the sun. Gravity is what gives you weight. "
     "It is why things that you drop fall to the ground. Isaac Newton described gravity as a force "
     "between masses; Albert Einstein later described it as the curvature of spacetime. In everyday "
     "life, the most important effect of gravity is that"),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def greedy(model, ids, n):
    """n greedy tokens after ids (a KV-cached loop), the top-1 minus top-2 logit at each step, and
    the 8 largest logits after the prompt as [id, value] pairs."""
    tokens, margins, first_top = [], [], None
    past = None
    inp = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(n):
            out = model(input_ids=inp, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].to(torch.float64)
            top = torch.topk(logits, 2)
            if first_top is None:
                t8 = torch.topk(logits, 8)
                first_top = [[int(i), float(v)] for v, i in zip(t8.values, t8.indices)]
            tok = int(top.indices[0])
            tokens.append(tok)
            margins.append(float(top.values[0] - top.values[1]))
            inp = torch.tensor([[tok]])
    return tokens, margins, first_top


def main():
    default_dir = os.environ.get("FLASHSERVE_MODEL_DIR", os.path.expanduser("~/.cache/flashserve/models"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(default_dir, MODEL_NAME))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "smollm2_greedy.json"))
    args = ap.parse_args()

    import gguf
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    d, name = os.path.split(os.path.abspath(args.model))
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
    model.eval()
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)

    cases = []
    for pname, text in PROMPTS:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        out, margins, first_top = greedy(model, ids, NEW_TOKENS)
        cases.append({"name": pname, "text": text, "prompt_ids": ids, "expected": out,
                      "top2_margin": [round(m, 6) for m in margins],
                      "first_step_top_logits": first_top,
                      "expected_text": tok.decode(out)})
        print(f"{pname}: {len(ids)} prompt tokens -> {out} (min margin {min(margins):.4g})", file=sys.stderr)

    doc = {
        "about": "fp32 greedy tokens of Hugging Face transformers on SmolLM2-135M-Instruct.Q4_1.gguf "
                 "(tensors dequantized to fp32 by transformers' GGUF loader), CPU, KV-cached decoding, "
                 f"{NEW_TOKENS} new tokens a prompt, EOS not stopping; top2_margin is the top-1 minus "
                 "top-2 logit at each step (float64 of the fp32 logits); first_step_top_logits the 8 largest logits after the prompt as [id, value]. Prompt ids come from the HF "
                 "tokenizer of the same GGUF, add_special_tokens=False.",
        "command": "~/.cache/flashserve-ref-venv/bin/python tools/gguf_reference.py",
        "model_file": MODEL_NAME,
        "model_sha256": sha256(args.model),
        "venv": "python3 -m venv ~/.cache/flashserve-ref-venv && "
                "~/.cache/flashserve-ref-venv/bin/pip install torch transformers gguf accelerate (from pypi.org)",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "gguf": _dist_version("gguf"), "accelerate": _dist_version("accelerate"),
                     "numpy": _dist_version("numpy"), "python": platform.python_version()},
        "new_tokens": NEW_TOKENS,
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.normpath(args.out)}", file=sys.stderr)


def _dist_version(name):
    from importlib.metadata import version
    return version(name)


if __name__ == "__main__":
    main()
