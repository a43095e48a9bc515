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


# The files behind the names stay importable by their paths (`from tinytorch.core.tensor import Tensor`),
# but they are not part of the API: `tinytorch.core` would show the folder layout beside PyTorch's names.
del core, _exported  # noqa: F821
