"""Compares our Llama forward with Hugging Face's LlamaForCausalLM on the folder tools/hf_dump
wrote (fp32, CPU): the same logits up to fp32 rounding. Needs torch and transformers (the GPU
machine has both). Usage: python3 tools/hf_crosscheck.py DIR"""
import sys

import numpy as np
import torch
from transformers import LlamaForCausalLM

d = sys.argv[1]
tokens = [int(t) for t in open(f"{d}/tokens.txt").read().split()]
ours = np.fromfile(f"{d}/logits_ours.f32", dtype=np.float32).reshape(len(tokens), -1)
model = LlamaForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
with torch.no_grad():
    hf = model(torch.tensor([tokens])).logits[0].float().numpy()
err = np.abs(hf - ours).max()
scale = np.abs(hf).max()
same = (hf.argmax(-1) == ours.argmax(-1)).mean()
print(f"HF vs flashserve: max |logit diff| {err:.3e} (max |logit| {scale:.2f}), argmax agreement {same:.4f}")
ok = err <= 1e-3 * max(1.0, scale) and same == 1.0
print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
sys.exit(0 if ok else 1)
