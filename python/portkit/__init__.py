"""portkit's Python companion: the parts of portkit that must run inside a PyTorch process.

Depends only on torch and numpy; works with Debian's python3-torch (1.13) and torch 2.x.
`__version__` is the version of the portkit binary it belongs to (both read `portkit/VERSION`).
"""
import os as _os

with open(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "VERSION"), encoding="utf-8") as _f:
    __version__ = _f.read().strip()
del _f, _os
