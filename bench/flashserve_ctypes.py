"""The benchmarks' handle on the C ABI: the package's ctypes layer (python/flashserve/_capi.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from flashserve._capi import *  # noqa: E402,F401,F403
from flashserve._capi import ctypes  # noqa: E402,F401
