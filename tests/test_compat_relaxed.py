"""call_relaxed: user handlers may declare fewer parameters than the runtime passes."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from doemu.compat import call_relaxed, max_positional
from doemu.compat import relaxed as relaxed_module


class Handlers:
    def alarm(self) -> str:
        return "alarm()"

    def alarm_with_info(self, info: Any) -> Any:
        return info

    def webSocketClose(self, ws: Any, code: int, reason: str) -> tuple[Any, int, str]:
        return (ws, code, reason)

    def everything(self, *args: Any) -> tuple[Any, ...]:
        return args

    def with_default(self, a: Any, b: Any = "default") -> tuple[Any, Any]:
        return (a, b)

    def keyword_only(self, a: Any, *, flag: bool = False) -> tuple[Any, bool]:
        return (a, flag)

    @staticmethod
    def static(a: Any) -> Any:
        return a

    @classmethod
    def klass(cls, a: Any) -> Any:
        return a

    async def async_alarm(self) -> str:
        return "async alarm()"


def test_bound_methods_drop_extra_arguments() -> None:
    h = Handlers()
    assert call_relaxed(h.alarm, {"retryCount": 0}) == "alarm()"
    assert call_relaxed(h.alarm_with_info, {"retryCount": 1}) == {"retryCount": 1}
    assert call_relaxed(h.webSocketClose, "ws", 1000, "bye", True) == ("ws", 1000, "bye")
    assert call_relaxed(h.with_default, 1, 2, 3) == (1, 2)
    assert call_relaxed(h.with_default, 1) == (1, "default")
    assert call_relaxed(h.keyword_only, 1, 2) == (1, False)
    assert call_relaxed(h.static, 1, 2) == 1
    assert call_relaxed(Handlers.klass, 1, 2) == 1


def test_var_positional_receives_everything() -> None:
    h = Handlers()
    assert call_relaxed(h.everything, 1, 2, 3) == (1, 2, 3)
    assert call_relaxed(lambda *a: a, 1, 2) == (1, 2)


async def test_async_functions() -> None:
    h = Handlers()
    assert await call_relaxed(h.async_alarm, {"isRetry": False}) == "async alarm()"

    async def plain(a: Any) -> Any:
        return a

    assert await call_relaxed(plain, 1, 2) == 1


def test_plain_functions_lambdas_partials_and_callables() -> None:
    def two(a: Any, b: Any) -> tuple[Any, Any]:
        return (a, b)

    assert call_relaxed(two, 1, 2, 3) == (1, 2)
    assert call_relaxed(lambda: "none", 1, 2) == "none"
    assert call_relaxed(functools.partial(two, 1), 2, 3) == (1, 2)

    class Callable:
        def __call__(self, a: Any) -> Any:
            return a

    assert call_relaxed(Callable(), 1, 2) == 1


def test_decorated_functions_use_the_wrapped_signature() -> None:
    def decorator(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    class Obj:
        @decorator
        def alarm(self) -> str:
            return "decorated"

    assert call_relaxed(Obj().alarm, {"retryCount": 0}) == "decorated"


def test_too_few_arguments_still_fail_as_python_would() -> None:
    def needs_two(a: Any, b: Any) -> None:
        pass

    with pytest.raises(TypeError):
        call_relaxed(needs_two, 1)


def test_builtins_without_signature_get_everything() -> None:
    assert call_relaxed(max, 3, 1, 2) == 3


def test_max_positional() -> None:
    h = Handlers()
    assert max_positional(h.alarm) == 0
    assert max_positional(Handlers.alarm) == 1
    assert max_positional(h.webSocketClose) == 3
    assert max_positional(h.everything) == -1
    assert max_positional(h.keyword_only) == 1


def test_arity_is_cached_per_function(monkeypatch: pytest.MonkeyPatch) -> None:
    def target(a: Any) -> Any:
        return a

    computed: list[Any] = []
    original = relaxed_module._compute

    def counting(fn: Any) -> int:
        computed.append(fn)
        return original(fn)

    monkeypatch.setattr(relaxed_module, "_compute", counting)
    for _ in range(5):
        assert call_relaxed(target, 1, 2) == 1

    class Obj:
        def method(self, a: Any) -> Any:
            return a

    for _ in range(5):
        assert call_relaxed(Obj().method, 1, 2) == 1  # a new bound method object each time
    assert computed == [target, Obj.method]


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relaxed_module, "_CACHE_LIMIT", 3)
    monkeypatch.setattr(relaxed_module, "_cache", {})
    fns = [eval("lambda a: a") for _ in range(10)]
    for fn in fns:
        assert call_relaxed(fn, 1, 2) == 1
    assert len(relaxed_module._cache) <= 3
