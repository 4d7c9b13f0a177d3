"""Imports FlashInfer 0.7.2.post1 on the GPU machine, which has torch and triton but not the rest
of what the wheel's metadata asks for. Import this module before `import flashinfer`.

What `import flashinfer` needs beyond torch (measured: import, then the fa3 prefill JIT specs):
tvm_ffi (carried in /tmp/site), packaging, requests, pynvml, tqdm (carried as fallbacks in
/tmp/site-deps, appended to sys.path here so the machine's own copies win), typing_extensions >= 4.13
(for tvm_ffi; the carried one is loaded only where the machine's is older), numpy (not carried:
only flashinfer.attn_scores and flashinfer.fused_moe.da_tuner import it at module level, and the fa3
prefill path never touches it). cuda-tile, nvidia-cutlass-dsl, nccl4py, cudnn-frontend, einops and
the others of Requires-Dist are imported lazily or under try/except, so they need nothing.

Where numpy is absent, a stub stands in for it during `import flashinfer` only: tvm_ffi is
imported first (it checks for numpy and does without), the stub is removed afterwards, and any use
of it raises ImportError naming numpy. Also sets the JIT's env defaults (scripts/gpu_peers.sh
install sets the same), so that a run without `install` in its shell still finds nvcc and ninja and
keeps its cache under /tmp.
"""
import importlib.util
import os
import shutil
import sys
import types

os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", "/tmp/fi-cache")  # cache: /tmp/fi-cache/.cache/flashinfer
os.environ.setdefault("TVM_FFI_CACHE_DIR", "/tmp/fi-cache/tvm-ffi")
os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")  # H200: sm_90a only, one cache dir name
if shutil.which("ninja") is None and os.path.exists("/tmp/site/bin/ninja"):
    os.environ["PATH"] = "/tmp/site/bin" + os.pathsep + os.environ.get("PATH", "")

_deps = os.environ.get("FLASHSERVE_FI_DEPS", "/tmp/site-deps")
if os.path.isdir(_deps) and _deps not in sys.path:
    sys.path.append(_deps)


class _Missing(types.ModuleType):
    """A module that flashinfer imports at module level but the fa3 prefill path never uses."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise ImportError(f"{self.__name__} is not installed on this machine: flashinfer_shim stubbed it "
                          f"for `import flashinfer`, and this code path needs {self.__name__}.{name}")


def _import_flashinfer():
    if "flashinfer" in sys.modules:
        return
    import torch  # noqa: F401  (before the stubs: torch probes numpy itself)
    import typing_extensions
    newer = os.path.join(_deps, "typing_extensions.py")
    if not hasattr(typing_extensions, "get_annotations") and os.path.exists(newer):
        # tvm_ffi needs typing_extensions >= 4.13 (get_annotations); Ubuntu 24.04's is 4.10, enough
        # for torch. The carried one replaces it from here on; modules that hold the old keep it.
        spec = importlib.util.spec_from_file_location("typing_extensions", newer)
        module = importlib.util.module_from_spec(spec)
        sys.modules["typing_extensions"] = module
        spec.loader.exec_module(module)
    import tvm_ffi  # noqa: F401  (after torch, before the stubs: it does without numpy when absent)
    stubs = [name for name in ("numpy",) if importlib.util.find_spec(name) is None]
    for name in stubs:
        stub = _Missing(name)
        stub.__path__ = []  # a package, so that `import numpy.x` finds the stub too
        sys.modules[name] = stub
    try:
        import flashinfer  # noqa: F401
    finally:
        for name in stubs:
            for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                if isinstance(sys.modules[key], _Missing):
                    del sys.modules[key]


_import_flashinfer()
