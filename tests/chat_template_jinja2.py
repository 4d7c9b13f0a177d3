#!/usr/bin/env python3
"""Chat templates: our renderer against Python's jinja2, byte for byte.

Renders every case with jinja2 set up exactly as Hugging Face transformers renders chat
templates (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
loopcontrols extension and a {% generation %} tag, transformers' tojson and raise_exception,
strftime_now at a fixed time) and with ours (the chat_template_render binary), and requires the
same bytes, or an error from both (and, for raise_exception, the same message).

Cases (tests/data/chat_templates/): every template x variant (extra variables such as tools) x
message set x add_generation_prompt from cases.json, plus the language snippets of
snippets.json, plus 1500 random whitespace-control templates (fixed seed). jinja2's results are also kept in expected.jsonl, which test_chat_template checks
without Python; --update-golden rewrites it, and a stale file fails this test.

Usage: chat_template_jinja2.py RENDERER [--update-golden]
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "chat_templates")
GOLDEN = os.path.join(DATA, "expected.jsonl")


def find_jinja2_python():
    """The python3 on PATH may be pyenv's, without jinja2: try Debian's and the tools venv."""
    candidates = ["/usr/bin/python3", os.path.expanduser("~/.cache/flashserve-pytools/bin/python")]
    for exe in candidates:
        if os.path.realpath(exe) == os.path.realpath(sys.executable) or not os.path.exists(exe):
            continue
        probe = subprocess.run([exe, "-c", "import jinja2"], capture_output=True)
        if probe.returncode == 0:
            return exe
    return None


try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    if os.environ.get("FLASHSERVE_JINJA2_REEXEC") != "1":
        exe = find_jinja2_python()
        if exe:
            os.environ["FLASHSERVE_JINJA2_REEXEC"] = "1"
            os.execv(exe, [exe] + sys.argv)
    print("skipped: no Python with jinja2 (scripts/setup.sh installs Debian's python3-jinja2)")
    sys.exit(0)


class Generation(Extension):
    """transformers' AssistantTracker tag, without the tracking: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation"), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def make_env(now_unix):
    import datetime

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.fromtimestamp(now_unix).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def read_text(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def load_cases():
    with open(os.path.join(DATA, "cases.json"), encoding="utf-8") as f:
        spec = json.load(f)
    with open(os.path.join(DATA, "snippets.json"), encoding="utf-8") as f:
        snippets = json.load(f)
    now = spec["now_unix"]
    cases = []
    for tname in sorted(spec["templates"]):
        t = spec["templates"][tname]
        source = read_text(os.path.join(DATA, tname))
        for variant in t["variants"]:
            for mname in sorted(spec["message_sets"]):
                for agp in (False, True):
                    cases.append({
                        "id": f"{tname}/{variant['name']}/{mname}/{int(agp)}",
                        "ref": {"template_file": tname, "variant": variant["name"], "messages_set": mname},
                        "template": source, "messages": spec["message_sets"][mname], "add_generation_prompt": agp,
                        "bos_token": t["bos_token"], "eos_token": t["eos_token"], "extra": variant.get("extra", {}),
                        "now_unix": now})
    for i, s in enumerate(snippets):
        cases.append({"id": f"snippet/{i}", "ref": {"snippet": i}, "template": s["template"], "messages": s["messages"],
                      "add_generation_prompt": False, "bos_token": "<s>", "eos_token": "</s>", "extra": {},
                      "now_unix": now})
    return cases


def random_whitespace_cases(seed=23, count=1500):
    """Random nestings of text, {{ }}, {% if/for/set/raw %} and comments with every whitespace
    control sign and whitespace around them (spaces, tabs, newlines, \r\n, U+3000): the lexer's
    trim_blocks / lstrip_blocks / -/+ rules against jinja2's. Fixed seed; live only (not golden)."""
    import random
    rng = random.Random(seed)

    def ws():
        return rng.choice(["", " ", "  ", "\n", " \n", "\n  ", "\t", "\n\n", " \t\n ", "\u3000", "\r\n"])

    def sign():
        return rng.choice(["", "", "-", "+"])

    def gen(depth=0):
        parts = []
        for _ in range(rng.randint(1, 6)):
            k = rng.random()
            if k < 0.3:
                parts.append(rng.choice(["a", "b c", "x\ny", ""]) + ws())
            elif k < 0.5:
                expr = rng.choice(["'v'", "1", "m.role if m is defined", "loop.index if loop is defined else 0", "x ~ 'q'"])
                parts.append(ws() + "{{" + sign() + " " + expr + " " + rng.choice(["", "-"]) + "}}" + ws())
            elif k < 0.6:
                parts.append(ws() + "{#" + sign() + " c " + sign() + "#}" + ws())
            elif k < 0.7 and depth < 3:
                parts.append(ws() + "{%" + sign() + " if " + rng.choice(["true", "false", "x"]) + " " + sign() + "%}" + ws() +
                             gen(depth + 1) + ws() + "{%" + sign() + " else " + sign() + "%}" + gen(depth + 1) + "{%" +
                             sign() + " endif " + sign() + "%}" + ws())
            elif k < 0.8 and depth < 3:
                parts.append(ws() + "{%" + sign() + " for m in messages " + sign() + "%}" + ws() + gen(depth + 1) + ws() +
                             "{%" + sign() + " endfor " + sign() + "%}" + ws())
            elif k < 0.9:
                parts.append(ws() + "{%" + sign() + " set x = " + rng.choice(["1", "'s'", "x ~ 1"]) + " " + sign() + "%}" + ws())
            else:
                raw_sign = rng.choice(["", "-"])
                parts.append(ws() + "{%" + raw_sign + " raw " + raw_sign + "%}" + ws() + "{{ r }}" + ws() + "{%" + sign() +
                             " endraw " + sign() + "%}" + ws())
        return "".join(parts)

    cases = []
    for i in range(count):
        t = gen() + ("\n" if rng.random() < 0.3 else "")
        cases.append({"id": f"random_whitespace/{i}", "ref": None, "template": t,
                      "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
                      "add_generation_prompt": False, "bos_token": "", "eos_token": "", "extra": {}, "now_unix": 0})
    return cases


def render_jinja2(cases):
    envs = {}
    compiled = {}
    results = []
    for c in cases:
        env = envs.setdefault(c["now_unix"], make_env(c["now_unix"]))
        try:
            key = (c["now_unix"], c["template"])
            if key not in compiled:
                compiled[key] = env.from_string(c["template"])
            kwargs = {"messages": c["messages"], "tools": None, "documents": None,
                      "add_generation_prompt": c["add_generation_prompt"], "bos_token": c["bos_token"],
                      "eos_token": c["eos_token"]}
            kwargs.update(c["extra"])
            results.append({"ok": True, "out": compiled[key].render(**kwargs)})
        except Exception as e:  # any jinja2 error: ours must fail too
            raised = type(e) is jinja2.exceptions.TemplateError  # raise_exception's
            results.append({"ok": False, "error": str(e), "raised": raised})
    return results


def render_ours(renderer, cases):
    lines = [json.dumps({k: v for k, v in c.items() if k != "ref"}, ensure_ascii=False) for c in cases]
    proc = subprocess.run([renderer], input="\n".join(lines) + "\n", capture_output=True, text=True, encoding="utf-8",
                          timeout=600)
    if proc.returncode != 0:
        print(proc.stderr)
        raise SystemExit(f"{renderer} exited {proc.returncode}")
    out = [json.loads(l) for l in proc.stdout.split("\n") if l.strip()]
    if len(out) != len(cases):
        raise SystemExit(f"{renderer} answered {len(out)} cases of {len(cases)}")
    return out


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    renderer = sys.argv[1]
    update = "--update-golden" in sys.argv[2:]
    cases = load_cases() + random_whitespace_cases()
    expected = render_jinja2(cases)
    ours = render_ours(renderer, cases)
    passed = failed = 0
    identical = both_error = 0
    for c, e, o in zip(cases, expected, ours):
        problem = None
        if e["ok"] and o["ok"]:
            if e["out"] != o["out"]:
                problem = f"output differs\n  jinja2: {e['out']!r}\n  ours:   {o['out']!r}"
        elif e["ok"] != o["ok"]:
            problem = (f"jinja2 rendered {e['out']!r} but ours failed: {o['error']}" if e["ok"]
                       else f"jinja2 failed ({e['error']}) but ours rendered {o['out']!r}")
        elif e["raised"] and not o["error"].endswith(e["error"]):
            problem = f"raise_exception message differs\n  jinja2: {e['error']!r}\n  ours:   {o['error']!r}"
        if problem:
            failed += 1
            print(f"FAIL {c['id']}: {problem}")
        else:
            passed += 1
            if e["ok"]:
                identical += 1
            else:
                both_error += 1

    golden_lines = [json.dumps(dict(c["ref"], id=c["id"], add_generation_prompt=c["add_generation_prompt"], **e),
                               ensure_ascii=False, sort_keys=True) for c, e in zip(cases, expected) if c["ref"]]
    golden_text = "\n".join(golden_lines) + "\n"
    if update:
        with open(GOLDEN, "w", encoding="utf-8", newline="") as f:
            f.write(golden_text)
        print(f"wrote {GOLDEN} ({len(golden_lines)} cases, jinja2 {jinja2.__version__})")
    elif not os.path.exists(GOLDEN) or read_text(GOLDEN) != golden_text:
        failed += 1
        print(f"FAIL golden: {GOLDEN} is not what jinja2 {jinja2.__version__} renders now; "
              "re-run with --update-golden and commit it")
    print(f"jinja2 {jinja2.__version__}: {identical} cases byte-identical, {both_error} fail in both, "
          f"of {len(cases)}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
