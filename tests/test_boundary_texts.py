"""The boundary's refusals carry Cloudflare's exact text; doemu's advice is a note.

Each text below was observed on workerd with Python Workers (``e2e/differential/test_boundary.py``
runs the same code on both targets); these are the fast unit checks of doemu's side. The texts
are spelled out (golden), not imported from doemu.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest

from doemu.compat.pyodide.ffi import jsnull
from doemu.ids import IdFactory
from doemu.jsboundary import hinted, set_strict
from doemu.loader import entropy_refused, is_entropy_refusal
from doemu.runtime import Env


@pytest.fixture
def strict() -> Iterator[None]:
    set_strict(True)
    yield
    set_strict(True)


def test_hinted_keeps_the_text_and_adds_a_note() -> None:
    exc = hinted(TypeError("the text"), "the advice")
    assert str(exc) == "the text"
    assert exc.__notes__ == ["doemu: the advice"]


def test_env_errors_have_the_sdk_texts(strict: None) -> None:
    env = Env({"PROBE": 1})
    with pytest.raises(AttributeError) as missing:
        env.MISSING  # noqa: B018
    assert str(missing.value) == "MISSING"
    assert "it has: PROBE" in missing.value.__notes__[0]
    refusals = {
        "'_EnvWrapper' object is not iterable": lambda: iter(env),
        "argument of type '_EnvWrapper' is not a container or iterable": lambda: "PROBE" in env,
        "'_EnvWrapper' object is not subscriptable": lambda: env["PROBE"],
    }
    for text, refused in refusals.items():
        with pytest.raises(TypeError) as info:
            refused()
        assert str(info.value) == text  # the note (pytest's match reads it too) is apart
        assert "getattr(env, name)" in info.value.__notes__[0]


def test_each_env_view_lists_only_what_it_read(strict: None) -> None:
    """On Cloudflare each entry-worker instance and each object gets its own env wrapper."""
    env = Env({"A": 1, "B": 2})
    first, second = env.view(), env.view()
    assert first.A == 1
    assert dir(first) == ["A"]
    assert dir(second) == []
    second.C = 3  # writes go to the shared bindings
    assert first.C == 3
    set_strict(False)
    assert dir(second) == ["A", "B", "C"]


def test_json_dumps_jsnull_is_null() -> None:
    """Pyodide's json encodes ``jsnull`` as ``null``; other unknown values still fail."""
    assert json.dumps(jsnull) == "null"
    assert json.dumps({"a": [jsnull, None]}) == '{"a": [null, null]}'
    with pytest.raises(TypeError, match="not JSON serializable"):
        json.dumps(object())


def test_an_id_is_unhashable_as_a_js_proxy(strict: None) -> None:
    with pytest.raises(TypeError) as info:
        hash(IdFactory("w-C").from_name("x"))
    assert str(info.value) == "unhashable type: 'pyodide.ffi.JsProxy'"
    assert "use str(id)" in info.value.__notes__[0]


def test_entropy_at_import_is_a_plain_oserror() -> None:
    """The error line is Cloudflare's: ``OSError: [Errno 29] Cannot get …``."""
    with entropy_refused(), pytest.raises(OSError) as info:
        random.Random()
    assert type(info.value) is OSError
    assert str(info.value) == "[Errno 29] Cannot get entropy outside of request context"
    assert is_entropy_refusal(info.value)
    assert not is_entropy_refusal(OSError(29, "something else"))
