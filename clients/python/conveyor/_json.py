"""JSON text exactly as JavaScript's JSON.stringify writes it, so a job enqueued from Python
stores the same bytes as the TypeScript producer for the same value (compact separators, raw
non-ASCII, numbers in ECMAScript's Number-to-string form: 1.0 -> "1", 1e-05 -> "0.00001")."""

import json
import math
from typing import Any, List

_MAX_DEPTH = 1000


class NotJSONError(ValueError):
    """The value has no JSON text (a set, an object, NaN or infinity, a cycle)."""


def _js_number(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        raise NotJSONError(f"{x!r} is not a JSON number")
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    sign = "-" if x < 0 else ""
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    int_part, _, frac = mantissa.partition(".")
    digits = int_part + frac
    point = len(int_part) + (int(exp_text) if exp_text else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    s = stripped.rstrip("0")
    k, n = len(s), point
    # ECMAScript Number::toString(10): s × 10^(n−k), shortest digits s
    if k <= n <= 21:
        out = s + "0" * (n - k)
    elif 0 < n <= 21:
        out = s[:n] + "." + s[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + s
    else:
        e = n - 1
        exp = ("+" if e > 0 else "-") + str(abs(e))
        out = (s if k == 1 else s[0] + "." + s[1:]) + "e" + exp
    return sign + out


def _encode(value: Any, out: List[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise NotJSONError("nested too deeply (a cycle?)")
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(_js_number(float(value)))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in value.items():
            if isinstance(key, str):
                name = key
            elif key is None or isinstance(key, (bool, int, float)):
                name = json.dumps(key)  # as json.dumps names them: true, 1, 1.5, null
            else:
                raise NotJSONError(f"a {type(key).__name__} key has no JSON text")
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(name, ensure_ascii=False))
            out.append(":")
            _encode(item, out, depth + 1)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out, depth + 1)
        out.append("]")
    else:
        raise NotJSONError(f"a {type(value).__name__} has no JSON text")


def dumps(value: Any) -> str:
    """JSON text for `value` as JSON.stringify writes it; NotJSONError when it has none."""
    out: List[str] = []
    _encode(value, out, 0)
    return "".join(out)
