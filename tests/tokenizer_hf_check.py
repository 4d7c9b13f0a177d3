#!/usr/bin/env python3
"""Exactness of flashserve's tokenizer against Hugging Face `tokenizers`, and its speed.

Run in the test-tools venv (scripts/setup.sh makes it) by tests/tokenizer_hf_check.sh:

  tokenizer_hf_check.py --cli build/server/text/flashserve_tokenize --suite smollm2|vocabs|synthetic
  tokenizer_hf_check.py --cli ... --bench [--bench-mb 4]

Suites:
  smollm2    the SmolLM2-135M-Instruct GGUF (tokenizer.ggml.pre = "smollm"): ours loads the
             GGUF's tokenizer keys, and ours loads a tokenizer.json; HF loads that same
             tokenizer.json, built here from the GGUF's tokens and merges with the pipeline that
             "smollm" means (each digit alone, then GPT-2's ByteLevel regex). transformers'
             own GGUF conversion is checked to hold the same tokens, merges and special tokens.
  vocabs     llama.cpp's vocabulary-only GGUFs for GPT-2, Llama 3 (llama-bpe), Qwen2 and
             StarCoder, with the .inp/.out pairs llama.cpp generated with each model's own HF
             tokenizer: first our reconstruction of each tokenizer.json must reproduce those
             ids through HF (so the pipelines here are the models' real ones), then ours (from
             the GGUF keys and from that json) must equal HF on the whole corpus.
  synthetic  tokenizer.json files made here (SmolLM2's vocabulary with Llama-3's and Qwen2's
             regexes, Digits runs, every Split behavior, lstrip/rstrip/single_word/normalized
             added tokens, "a b" string merges, ignore_merges, a small trained BPE with an unk
             token and missing bytes), each loaded by HF and by ours.

Every suite compares, line by line: encode (add_special_tokens off, and on for a subset),
decode(encode(x)) == x for ours, decode of random id sequences (with and without special
tokens; the streaming detokenizer must add up to decode). Random lines come from fixed seeds.
Prints "skipped: ..." (ctest's SKIP_REGULAR_EXPRESSION) only when the model or files are
missing; a mismatch prints the line, both id lists and exits 1.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unicodedata

try:
    import tokenizers
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
except ImportError:
    print("skipped: the HF tokenizers package is missing (run scripts/setup.sh for the test venv)")
    sys.exit(0)

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")

MODEL_DIR = os.environ.get("FLASHSERVE_MODEL_DIR", os.path.expanduser("~/.cache/flashserve/models"))
VOCAB_DIR = os.environ.get("FLASHSERVE_TOKENIZER_DIR", os.path.expanduser("~/.cache/flashserve/tokenizers"))
SMOLLM2 = os.path.join(MODEL_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf")


# ---- the corpus ------------------------------------------------------------------------------

FIXED = [
    "Hello world", " Hello world", "Hello World!", "Hello, world!", "  leading and trailing  ",
    "It's a test: we're here, they'll go, I've seen, you'd know, I'm fine, don't.",
    "IT'S LOUD: WE'RE HERE, THEY'LL GO, I'VE SEEN, YOU'D, I'M, DON'T",
    "'s 're 'll 've 'm 'd 't", "'S 'RE 'LL", "x'sy'llz",
    "Äpfel und Birnen, café, naïve, façade, Œuvre, São Paulo, Zürich, Ångström",
    "Ελληνικά κείμενα, русский текст, українська мова, български",
    "中文文本，测试一下。日本語のテキストです。한국어 텍스트입니다.",
    "emoji: 🦙 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ 🤖🤖🤖",
    "a  b   c    d     e", "tabs\tand\t\tmore\t\t\ttabs", "\t\n\t\n", "\n", "\n\n\n", " \n \n ", "   ",
    "line one\nline two\r\nline three\rend", "trailing spaces   \n   next", "x \n\n\n y",
    "1234567890123456789 3.14159 1,000,000 0x7fff 1e-9 2024-06-01 12:34:56",
    "phone +1 (555) 123-4567, ۱۲۳ ١٢٣ १२३ ０１２３ ²³ ½ Ⅳ",
    "def f(x):\n    return x ** 2  # square\n\nprint(f(12))\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "x<|im_end|>y<|im_start|>z", "<|im_start|<|im_end|", "<|endoftext|><|endoftext|>",
    "text <|im_start|> spaced <|im_end|> tokens", "<|im_start|>",
    "nbsp\u00a0here, em\u2003space, ideographic\u3000space, nel\u0085x, ls\u2028ps\u2029",
    "a \u180e! b", "x\u180e\u180e y", "!\u180e? \u180e", "a \u0085b", "x\u0085 y", "\u0085\u0085\u0085 z", "a \u2028b \u00a0c \u3000d \u1680e \u205ff",
    "zwsp\u200bjoin\u200dfeff\ufeffend", "ctrl \x1c\x1d\x1e\x1f \x01\x02 \x7f",
    "combining e\u0301 a\u0308 n\u0303, hangul jamo \u1100\u1161",
    "العربية نص، עברית טקסט", "हिन्दी पाठ, ภาษาไทย, ქართული",
    "math ∑∫√∞ ≤≥≠ → ⇒ ∀∃, currency $€£¥₹, quotes “”‘’«»",
    "long s ſ 'ſ Kelvin \u212a 'K", "ǅ ǈ ǋ titlecase",
    "URL https://example.com/path?q=1&r=two#frag and mail a.b@c.de",
    "!!!???...---___===+++***", "(((nested)))[[[x]]]{{{y}}}",
    "a" * 300, " " * 200, "\n" * 50, "ab" * 150 + "!", "9" * 100,
    "snake_case_name CamelCaseName kebab-case-name SCREAMING_CASE",
]


def random_lines(seed, count):
    """Random text from several scripts (no surrogates), fixed seed."""
    rng = random.Random(seed)
    ranges = [
        (0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF),
        (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2100, 0x22FF),
        (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1F64F),
        (0x1F900, 0x1F9FF), (0x10000, 0x1007F), (0x1D400, 0x1D7FF),
    ]
    spaces = [" ", "  ", "\n", "\t", " \n", "\n\n", "\u00a0", "\u3000", "\r\n", "   ", " \u0085", "\u2028 ",
              "\x0b", "\x0c", " \x1c", "\u2009\u200a", "\u180e", "\u200b "]
    lines = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            lo, hi = rng.choice(ranges)
            word = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8)))
            if rng.random() < 0.2:
                word = str(rng.randint(0, 10 ** rng.randint(1, 15)))
            if rng.random() < 0.1:
                word += rng.choice(["'s", "'ll", "'RE", "'d", "<|im_end|>", "<|im_start|>"])
            parts.append(word)
            parts.append(rng.choice(spaces) if rng.random() < 0.7 else "")
        lines.append("".join(parts))
    return lines


def wide_random_lines(seed, count):
    """Any assigned scalar value (every plane), mixed with spaces and digits. Code points that
    Python's Unicode (14.0 in 3.11) leaves unassigned are left out: PCRE2 10.42 knows Unicode
    15.0, HF's Oniguruma a later one, and a letter added since (U+13B7A, Egyptian Hieroglyphs
    Extended-A, Unicode 16) is \\p{L} for HF and not for us; that is the one known difference."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            if r < 0.15:
                chars.append(" ")
            elif r < 0.25:
                chars.append(rng.choice("0123456789'\n\t"))
            else:
                cp = rng.randint(0, 0x10FFFF) if rng.random() < 0.3 else rng.randint(0, 0xFFFF)
                assigned = not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)) != "Cn"
                chars.append(chr(cp) if assigned else "x")
        lines.append("".join(chars))
    return lines


def file_chunks(max_bytes, seed):
    """Real text: Python's own sources and docs on this machine, in chunks of a few lines."""
    roots = [os.path.dirname(os.__file__), "/usr/share/common-licenses", "/usr/share/doc"]
    files = []
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for n in sorted(names):
                if n.endswith((".py", ".txt", ".md", ".rst")) or root.endswith("licenses"):
                    files.append(os.path.join(dirpath, n))
    files.sort()
    random.Random(seed).shuffle(files)
    chunks, total = [], 0
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        lines = text.splitlines(keepends=True)
        for i in range(0, len(lines), 8):
            chunk = "".join(lines[i:i + 8])
            if chunk:
                chunks.append(chunk)
                total += len(chunk.encode())
        if total >= max_bytes:
            break
    return chunks


def corpus(real_bytes=300_000):
    return (FIXED + random_lines(1234, 1500) + random_lines(98765, 500) + wide_random_lines(555, 500)
            + file_chunks(real_bytes, 7))


# ---- running ours ----------------------------------------------------------------------------

def run_cli(cli, source_args, mode_args, lines):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
        path = f.name
    try:
        run = subprocess.run([cli] + source_args + [mode_args[0], path] + mode_args[1:],
                             capture_output=True, text=True, encoding="utf-8")
        if run.returncode != 0:
            raise SystemExit(f"FAILED: {' '.join([cli] + source_args)} exited {run.returncode}: {run.stderr.strip()}")
        out = run.stdout
    finally:
        os.unlink(path)
    return [json.loads(line) for line in out.splitlines()]


def compare(name, hf, cli, source_args, lines, seed):
    """Encode and decode comparisons; returns the number of failures."""
    failures = 0
    shown = 0
    for add_special in (False, True):
        subset = lines if not add_special else lines[::7]
        ours = run_cli(cli, source_args, ["--encode"] + (["--add-special-tokens"] if add_special else []), subset)
        equal = roundtrip = lossy = 0
        for text, o in zip(subset, ours):
            ref = hf.encode(text, add_special_tokens=add_special).ids
            if o.get("ids") == ref:
                equal += 1
            else:
                failures += 1
                if shown < 5:
                    shown += 1
                    print(f"  MISMATCH [{name}, add_special_tokens={add_special}] {text[:200]!r}\n"
                          f"    hf  : {ref[:60]}\n    ours: {o.get('ids', o)[:60] if 'ids' in o else o}")
            # decode(encode(x)) == x wherever it holds for HF (a vocabulary may lack a byte's
            # symbol, SmolLM2 lacks \x04 and \x1d: both drop it).
            if not add_special:
                hf_roundtrip = hf.decode(ref, skip_special_tokens=False) == text
                if o.get("roundtrip"):
                    roundtrip += 1
                if o.get("roundtrip") != hf_roundtrip:
                    failures += 1
                    if shown < 5:
                        shown += 1
                        print(f"  ROUNDTRIP [{name}] ours {o.get('roundtrip')}, HF {hf_roundtrip} for {text[:200]!r}")
                elif not hf_roundtrip:
                    lossy += 1
        print(f"{name}: encode add_special_tokens={add_special}: {equal}/{len(subset)} lines equal to HF"
              + ("" if add_special else f", decode(encode(x)) == x for {roundtrip}/{len(subset)}"
               f" (the other {lossy} are not for HF either: bytes without a symbol dropped, prefix spaces, removed splits)"))
        if len(ours) != len(subset):
            print(f"  {name}: ours answered {len(ours)} lines of {len(subset)}")
            failures += 1
    # Decode: random ids over the vocabulary, with runs of byte tokens that cut characters.
    rng = random.Random(seed)
    vocab = hf.get_vocab_size(with_added_tokens=True)
    present = sorted(hf.get_vocab(with_added_tokens=True).values())
    specials = [t.content for t in hf.get_added_tokens_decoder().values() if t.special]
    special_ids = [hf.token_to_id(s) for s in specials]
    multibyte = [hf.encode(s, add_special_tokens=False).ids for s in ["🦙", "中", "é", "👨‍👩‍👧", "𝔸", "한"]]
    multibyte = [m for m in multibyte if m] or [[present[0]]]
    seqs = []
    for _ in range(400):
        seq = []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            if r < 0.6:
                seq.append(rng.choice(present))
            elif r < 0.8:
                piece = rng.choice(multibyte)
                seq += piece[: rng.randint(1, len(piece))]  # sometimes a character cut short
            elif special_ids:
                seq.append(rng.choice(special_ids))
        seqs.append(seq)
    for skip in (False, True):
        ours = run_cli(cli, source_args, ["--decode"] + (["--skip-special-tokens"] if skip else []), seqs)
        equal = streamed = 0
        for seq, o in zip(seqs, ours):
            ref = hf.decode(seq, skip_special_tokens=skip)
            if o.get("text") == ref:
                equal += 1
            else:
                failures += 1
                if shown < 8:
                    shown += 1
                    print(f"  DECODE MISMATCH [{name}, skip={skip}] ids {seq[:30]}\n    hf  : {ref[:120]!r}\n"
                          f"    ours: {o.get('text', o)!r}"[:400])
            if o.get("stream_equal"):
                streamed += 1
            else:
                failures += 1
        print(f"{name}: decode skip_special_tokens={skip}: {equal}/{len(seqs)} id sequences equal to HF, "
              f"streaming deltas == decode for {streamed}/{len(seqs)} (vocab {vocab})")
    return failures


# ---- reference tokenizers --------------------------------------------------------------------

def read_gguf_tokenizer(path):
    from gguf import GGUFReader
    names = {"tokenizer.ggml.model": "model", "tokenizer.ggml.pre": "pre", "tokenizer.ggml.tokens": "tokens",
             "tokenizer.ggml.merges": "merges", "tokenizer.ggml.token_type": "token_type",
             "tokenizer.ggml.bos_token_id": "bos_token_id", "tokenizer.ggml.eos_token_id": "eos_token_id",
             "tokenizer.ggml.padding_token_id": "padding_token_id",
             "tokenizer.ggml.unknown_token_id": "unknown_token_id",
             "tokenizer.ggml.add_bos_token": "add_bos_token", "tokenizer.ggml.add_eos_token": "add_eos_token",
             "tokenizer.chat_template": "chat_template"}
    meta = {}
    for key, field in GGUFReader(path).fields.items():
        if key in names:
            v = field.contents()
            meta[names[key]] = v.tolist() if hasattr(v, "tolist") else v
    return meta


def pipeline_for(pre):
    """(pre_tokenizer, ignore_merges) of the real HF tokenizer that a GGUF pre name stands for."""
    if pre == "gpt-2":
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), False
    if pre == "llama-bpe":
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_RE), "isolated", invert=False),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), True
    if pre == "qwen2":
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_RE), "isolated", invert=False),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), False
    if pre in ("smollm", "starcoder"):
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]), False
    raise ValueError(f"no reference pipeline for pre '{pre}'")


def split_merge(m):
    i = m.index(" ", 1)
    return m[:i], m[i + 1:]


def hf_from_gguf_meta(meta):
    """The HF tokenizer a GGUF's tokenizer keys describe."""
    tokens, types = meta["tokens"], meta.get("token_type") or [1] * len(meta["tokens"])
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    pre, ignore_merges = pipeline_for(meta["pre"])
    tok = Tokenizer(models.BPE(vocab, [split_merge(m) for m in meta["merges"]], ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    added = []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty in (3, 4):
            added.append(AddedToken(t, special=ty == 3, normalized=False))
    tok.add_tokens(added)
    add_bos = meta.get("add_bos_token", meta["pre"] == "llama-bpe")
    if add_bos:
        bos = tokens[meta["bos_token_id"]]
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                           special_tokens=[(bos, meta["bos_token_id"])])
    return tok


def write_json(obj, directory, name):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    return path


def check_gguf_tokenizer(cli, gguf_path, name, lines, seed, workdir):
    meta = read_gguf_tokenizer(gguf_path)
    hf = hf_from_gguf_meta(meta)
    tj = os.path.join(workdir, name + ".tokenizer.json")
    hf.save(tj)
    hf = Tokenizer.from_file(tj)  # what ours reads is what HF reads
    meta_path = write_json(meta, workdir, name + ".gguf-meta.json")
    failures = compare(name + " (ours from GGUF keys)", hf, cli, ["--gguf-metadata-json", meta_path], lines, seed)
    failures += compare(name + " (ours from tokenizer.json)", hf, cli, ["--tokenizer-json", tj], lines, seed + 1)
    return failures, hf, meta


def check_transformers_conversion(gguf_path, meta):
    """transformers' own GGUF conversion: the same tokens, merges and special tokens?"""
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
        from transformers import AutoTokenizer
    except ImportError:
        print("smollm2: transformers not installed; its GGUF conversion not checked")
        return 0
    gguf_utils.is_torch_available = lambda: True  # metadata only: return_tensors=False needs no torch
    import transformers
    transformers.logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(os.path.dirname(gguf_path), gguf_file=os.path.basename(gguf_path))
    with tempfile.TemporaryDirectory() as d:
        tok.save_pretrained(d)
        with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
            conv = json.load(f)
    vocab = conv["model"]["vocab"]
    merges = [" ".join(m) if isinstance(m, list) else m for m in conv["model"]["merges"]]
    same_vocab = all(vocab.get(t) == i for i, t in enumerate(meta["tokens"])) and len(vocab) == len(meta["tokens"])
    same_merges = merges == meta["merges"]
    specials = sorted(a["id"] for a in conv["added_tokens"] if a["special"])
    control = [i for i, ty in enumerate(meta["token_type"]) if ty == 3]
    print(f"smollm2: transformers {transformers.__version__} GGUF conversion: vocab {len(vocab)} "
          f"{'==' if same_vocab else '!='} GGUF tokens, merges {len(merges)} {'==' if same_merges else '!='} "
          f"GGUF merges, special ids {'==' if specials == control else '!='} GGUF control tokens")
    print(f"smollm2: (its pipeline is not the model's: pre_tokenizer {conv['pre_tokenizer']['type']} without "
          f"Digits for pre='{meta['pre']}', post_processor {conv['post_processor']['type'] if conv['post_processor'] else None}"
          f" although tokenizer.ggml.add_bos_token={meta.get('add_bos_token')}; so the reference json is built "
          f"from the GGUF's keys instead)")
    return 0 if (same_vocab and same_merges and specials == control) else 1


# ---- suites ----------------------------------------------------------------------------------

def suite_smollm2(cli, lines, workdir):
    if not os.path.exists(SMOLLM2):
        print(f"skipped: {SMOLLM2} is missing (scripts/setup.sh fetches it)")
        return None
    failures, hf, meta = check_gguf_tokenizer(cli, SMOLLM2, "smollm2", lines, 11, workdir)
    failures += check_transformers_conversion(SMOLLM2, meta)
    return failures


def read_llama_cpp_pairs(path):
    with open(path + ".inp", encoding="utf-8") as f:
        inputs = f.read().split("\n__ggml_vocab_test__\n")
    with open(path + ".out", encoding="utf-8") as f:
        outputs = f.read().split("\n")
    inputs[-1] = inputs[-1].rstrip("\n")
    return inputs, [[int(x) for x in line.split()] for line in outputs[: len(inputs)]]


def suite_vocabs(cli, lines, workdir):
    names = ["gpt-2", "llama-bpe", "qwen2", "starcoder"]
    paths = [os.path.join(VOCAB_DIR, f"ggml-vocab-{n}.gguf") for n in names]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        print(f"skipped: {', '.join(missing)} missing (scripts/setup.sh extracts them from llama.cpp's sources)")
        return None
    failures = 0
    for i, (name, path) in enumerate(zip(names, paths)):
        meta = read_gguf_tokenizer(path)
        hf = hf_from_gguf_meta(meta)
        inputs, expected = read_llama_cpp_pairs(path)
        got = [hf.encode(t, add_special_tokens=False).ids for t in inputs]
        agree = sum(g == e for g, e in zip(got, expected))
        print(f"{name}: the reference pipeline reproduces the model's own HF ids on {agree}/{len(inputs)} of "
              f"llama.cpp's test texts")
        if agree != len(inputs):
            failures += 1
        ours = run_cli(cli, ["--gguf-metadata-json", write_json(meta, workdir, name + ".meta.json")], ["--encode"], inputs)
        agree_ours = sum(o.get("ids") == e for o, e in zip(ours, expected))
        print(f"{name}: ours (GGUF keys) reproduces them on {agree_ours}/{len(inputs)}")
        if agree_ours != len(inputs):
            failures += 1
        f, _, _ = check_gguf_tokenizer(cli, path, name, lines, 100 + i, workdir)
        failures += f
    return failures


def smollm2_like_vocab():
    """A vocabulary and merges for the synthetic tokenizers: SmolLM2's when present, else a small
    BPE trained here on the corpus."""
    if os.path.exists(SMOLLM2):
        meta = read_gguf_tokenizer(SMOLLM2)
        vocab = {t: i for i, t in enumerate(meta["tokens"])}
        return vocab, [split_merge(m) for m in meta["merges"]]
    from tokenizers import trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(corpus(100_000), trainers.BpeTrainer(vocab_size=3000, show_progress=False,
                                                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    j = json.loads(tok.to_str())
    return j["model"]["vocab"], [tuple(m) for m in j["model"]["merges"]]


def synthetic_tokenizers(workdir):
    vocab, merges = smollm2_like_vocab()
    out = []

    def save(name, tok, string_merges=False):
        path = os.path.join(workdir, name + ".json")
        j = json.loads(tok.to_str())
        if string_merges:  # the older "a b" format
            j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
        with open(path, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)
        out.append((name, path))

    def bpe(**kw):
        return Tokenizer(models.BPE(dict(vocab), list(merges), **kw))

    chat = [AddedToken("<|im_start|>", special=True, normalized=False),
            AddedToken("<|im_end|>", special=True, normalized=False)]
    # Llama 3's pipeline: Split(regex) + ByteLevel without its regex, ignore_merges, bos template.
    t = bpe(ignore_merges=True)
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_RE), "isolated"),
                                               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.add_special_tokens(chat)
    t.post_processor = processors.TemplateProcessing(single="<|im_start|> $A <|im_end|>",
                                                     special_tokens=[("<|im_start|>", vocab["<|im_start|>"]),
                                                                     ("<|im_end|>", vocab["<|im_end|>"])])
    save("llama3-style", t, string_merges=True)
    # Qwen2's regex, merges as pairs.
    t = bpe()
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_RE), "isolated"),
                                               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.add_special_tokens(chat)
    save("qwen2-style", t)
    # Digits in runs, ByteLevel with a prefix space (GPT-2 as RoBERTa sets it up), ByteLevel post.
    t = bpe()
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                               pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.ByteLevel(trim_offsets=True)
    t.add_special_tokens(chat)
    save("digits-prefix-space", t)
    # Every Split behavior, string and regex patterns, invert; added tokens with flags.
    for behavior in ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]:
        for invert in (False, True):
            t = bpe()
            t.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(" ", behavior, invert=invert),
                pre_tokenizers.Split(Regex(r"\p{N}+|[.,;:!?]"), behavior, invert=invert),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
            t.decoder = decoders.ByteLevel()
            t.add_special_tokens(chat)
            t.add_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True),
                          AddedToken("[SEP]", rstrip=True, normalized=False, special=True),
                          AddedToken("word", single_word=True, normalized=True),
                          AddedToken("wordy", single_word=False, normalized=True),
                          AddedToken("中文", single_word=True, normalized=False)])
            save(f"split-{behavior}{'-invert' if invert else ''}", t)
    # A small trained BPE whose alphabet lacks most bytes: unknowns fused into one unk.
    from tokenizers import trainers
    t = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.train_from_iterator([l for l in corpus(50_000) if l.isascii()][:3000],
                          trainers.BpeTrainer(vocab_size=600, show_progress=False, special_tokens=["<unk>"],
                                              limit_alphabet=70))
    t.decoder = decoders.ByteLevel()
    save("trained-unk", t)
    return out


def suite_synthetic(cli, lines, workdir):
    failures = 0
    extra = [f"a word here, words, sword, word! word_x {w}" for w in ["<mask>", " <mask>", "[SEP]  x", "中文字", "x中文"]]
    extra += ["  <mask>  [SEP]   after", "wordy word wordword", "1,2;3.4:5!6?7", "a  b  ", "<mask><mask> <mask>"]
    for i, (name, path) in enumerate(synthetic_tokenizers(workdir)):
        hf = Tokenizer.from_file(path)
        sample = lines if name in ("llama3-style", "qwen2-style", "digits-prefix-space") else lines[::5]
        failures += compare(name, hf, cli, ["--tokenizer-json", path], extra + sample, 500 + i)
    return failures


def bench(cli, workdir, megabytes):
    if not os.path.exists(SMOLLM2):
        print(f"skipped: {SMOLLM2} is missing")
        return 0
    meta = read_gguf_tokenizer(SMOLLM2)
    tj = os.path.join(workdir, "smollm2.tokenizer.json")
    hf_from_gguf_meta(meta).save(tj)
    hf = Tokenizer.from_file(tj)
    lines = random_lines(4242, 3000) + file_chunks(int(megabytes * 1e6), 3)
    nbytes = sum(len(l.encode()) for l in lines)
    best, first = 1e30, 0.0
    for r in range(3):
        t0 = time.perf_counter()
        ntok = 0
        for l in lines:
            ntok += len(hf.encode(l, add_special_tokens=False).ids)
        seconds = time.perf_counter() - t0
        first = seconds if r == 0 else first
        best = min(best, seconds)
    t0 = time.perf_counter()
    for _ in lines:
        hf.encode("", add_special_tokens=False)
    overhead = time.perf_counter() - t0  # Python's share of a call, counted against HF
    ours = run_cli(cli, ["--tokenizer-json", tj], ["--bench", "--repeat", "3"], lines)[0]
    print(f"bench: {len(lines)} texts, {nbytes / 1e6:.2f} MB, {ntok} tokens (ours {ours['tokens']})")
    print(f"bench: HF tokenizers {tokenizers.__version__} (Python loop, one thread, best of 3): {ntok / best:,.0f} "
          f"tokens/s ({nbytes / best / 1e6:.2f} MB/s); first pass {ntok / first:,.0f}; encoding empty strings "
          f"as often takes {overhead / best * 100:.1f}% of its time")
    print(f"bench: flashserve (best of 3): {ours['tokens_per_s']:,.0f} tokens/s ({ours['mb_per_s']:.2f} MB/s), "
          f"{ours['tokens_per_s'] / (ntok / best):.2f}x HF; first pass (cache cold) "
          f"{ours['first_pass_tokens_per_s']:,.0f} tokens/s")
    return 0 if ours["tokens"] == ntok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--suite", choices=["smollm2", "vocabs", "synthetic"])
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--bench-mb", type=float, default=4.0)
    args = ap.parse_args()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    with tempfile.TemporaryDirectory() as workdir:
        if args.bench:
            sys.exit(1 if bench(args.cli, workdir, args.bench_mb) else 0)
        lines = corpus()
        print(f"corpus: {len(lines)} texts, {sum(len(l.encode()) for l in lines) / 1e6:.2f} MB; "
              f"tokenizers {tokenizers.__version__}")
        failures = {"smollm2": suite_smollm2, "vocabs": suite_vocabs, "synthetic": suite_synthetic}[args.suite](
            args.cli, lines, workdir)
    if failures is None:  # skipped, and said so
        sys.exit(0)
    print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
