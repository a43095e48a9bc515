"""Plain data across the sandbox boundary: JSON with numpy arrays, scalars and tuples tagged.

Never pickle: decoding untrusted output must not run code. Only numeric and bool dtypes are accepted,
and a decoded array may not claim more bytes than it carries.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

ALLOWED_KINDS = "biuf"  # bool, signed and unsigned integers, floats


class WireError(ValueError):
    """The data does not follow the format (malformed, wrong dtype, or too large)."""


def encode(value: Any) -> Any:
    """Plain data -> JSON-ready data; raises WireError for anything else."""
    if isinstance(value, np.generic):  # before float: np.float64 is a float subclass
        return {"__scalar__": encode(np.asarray(value))}
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in ALLOWED_KINDS:
            raise WireError(f"arrays of dtype {value.dtype} cannot be sent")
        data = value if value.flags.c_contiguous else value.copy(order="C")  # keeps 0-d arrays 0-d
        return {"__ndarray__": base64.b64encode(data.tobytes()).decode("ascii"), "dtype": data.dtype.str,
                "shape": list(data.shape)}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(item) for item in value]}
    if isinstance(value, list):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise WireError("only dicts with string keys can be sent")
        return {"__dict__": {key: encode(item) for key, item in value.items()}}
    raise WireError(f"a {type(value).__name__} cannot be sent; return numbers, strings, numpy arrays, "
                    f"or lists, tuples and dicts of these")


def decode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, list):
        return [decode(item) for item in value]
    if not isinstance(value, dict) or len(value) == 0:
        raise WireError("malformed data")
    if "__ndarray__" in value:
        dtype = np.dtype(value["dtype"])
        if dtype.kind not in ALLOWED_KINDS:
            raise WireError(f"arrays of dtype {dtype} are not accepted")
        raw = base64.b64decode(value["__ndarray__"], validate=True)
        shape = tuple(int(n) for n in value["shape"])
        if any(n < 0 for n in shape) or int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != len(raw):
            raise WireError("an array's shape does not match its data")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    if "__scalar__" in value:
        return decode(value["__scalar__"])[()]
    if "__tuple__" in value:
        return tuple(decode(item) for item in value["__tuple__"])
    if "__dict__" in value:
        return {str(key): decode(item) for key, item in value["__dict__"].items()}
    raise WireError("malformed data")


def dumps(value: Any) -> str:
    return json.dumps(encode(value))


def loads(text: str) -> Any:
    try:
        return decode(json.loads(text))
    except (json.JSONDecodeError, TypeError, KeyError, ValueError) as error:
        raise WireError(str(error)) from None
