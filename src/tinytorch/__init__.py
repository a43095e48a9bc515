"""TinyTorch: the deep-learning framework you build, one module at a time.

Everything in this package is written by `tito export` from your notebooks: `_exported.py` imports the
public names of every module exported so far, and this file makes them `tinytorch.<name>`.
"""

try:
    from tinytorch._exported import *  # noqa: F403
except ModuleNotFoundError as error:
    if error.name != "tinytorch._exported":
        raise
    raise ImportError("tinytorch has no exported modules yet: run `tito export 01` first") from None


def _keep_freed_memory() -> None:
    """Ask glibc's malloc to keep freed memory for the next arrays instead of handing it back to the kernel.
    By default an array of more than 128 KiB is a fresh mapping, and every 4 KiB page of it costs a page fault
    on first touch: a GPT training step that allocates a few hundred such arrays then spends a tenth of its
    time in the kernel (about 10,000 faults a step here). PyTorch keeps a cache of freed blocks for the same
    reason. Elsewhere (macOS, musl) this does nothing."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: blocks up to 32 MiB come from the heap, reused when freed
    mallopt(-1, 1 << 30)   # M_TRIM_THRESHOLD: keep up to 1 GiB of free heap instead of returning it


_keep_freed_memory()

# The files behind the names stay importable by their paths (`from tinytorch.core.tensor import Tensor`),
# but they are not part of the API: `tinytorch.core` would show the folder layout beside PyTorch's names.
del core, _exported, _keep_freed_memory  # noqa: F821
