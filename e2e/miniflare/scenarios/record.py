"""What a binding call gave Python code, recorded the same way on Miniflare and on doemu.

Imported by every scenario of this folder (e2e/test_bindings_differential.py serves it beside the
scenario on both sides): ``seen(value)`` is a value's type and content, ``step`` records one call's
value or error (a ``JsException``'s text, any other exception's type and text).
"""

from pyodide.ffi import JsException


def seen(value):
    if isinstance(value, memoryview):
        return ["memoryview", bytes(value).hex()]
    if value is None or isinstance(value, bool | int | float | str):
        return [type(value).__name__, value]
    if isinstance(value, dict):
        return [type(value).__name__, {k: seen(v) for k, v in value.items()}]
    if isinstance(value, list):
        return ["list", [seen(v) for v in value]]
    constructor = getattr(getattr(value, "constructor", None), "name", None)
    return ["object", constructor or type(value).__name__]


async def step(out, name, make):
    try:
        out[name] = seen(await make())
    except JsException as exc:
        out[name] = ["JsException", str(exc)]
    except Exception as exc:
        out[name] = ["error", type(exc).__name__, str(exc)]
