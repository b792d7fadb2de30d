"""doemu.clone: structured-clone rules over msgpack."""

from __future__ import annotations

import collections
import datetime as dt
import enum
import math
import threading
from typing import Any

import pytest

from doemu.clone import clone, decode, encode
from doemu.errors import DataCloneError, StorageError


class Color(enum.IntEnum):
    RED = 1


class Name(enum.StrEnum):
    ALICE = "alice"


class Foo:
    pass


UTC2 = dt.timezone(dt.timedelta(hours=2))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, True),
        (False, False),
        (0, 0),
        (-1, -1),
        (2**63 - 1, 2**63 - 1),
        (2**63, 2**63),
        (2**64 - 1, 2**64 - 1),
        (2**64, 2**64),
        (-(2**63), -(2**63)),
        (-(2**63) - 1, -(2**63) - 1),
        (10**40, 10**40),
        (-(10**40), -(10**40)),
        (1.5, 1.5),
        (float("inf"), float("inf")),
        (float("-inf"), float("-inf")),
        ("", ""),
        ("héllo 😀", "héllo 😀"),
        (b"\x00\xff", b"\x00\xff"),
        (bytearray(b"ab"), b"ab"),
        (memoryview(b"cd"), b"cd"),
        ([1, [2, [3]]], [1, [2, [3]]]),
        ((1, (2, 3)), [1, [2, 3]]),
        ({"a": {"b": [1]}}, {"a": {"b": [1]}}),
        (
            {1: "one", 2.5: "f", None: "n", b"k": "b"},
            {1: "one", 2.5: "f", None: "n", b"k": "b"},
        ),
        ({(1, 2): "tuple key"}, {(1, 2): "tuple key"}),
        ({frozenset({1}): "fs key"}, {frozenset({1}): "fs key"}),
        ({1, 2, 3}, {1, 2, 3}),
        (frozenset({"a"}), {"a"}),
        ({(1, 2), (3, 4)}, {(1, 2), (3, 4)}),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.datetime(2024, 1, 2, 3, 4, 5, 6)),
        (dt.datetime(2024, 1, 2, tzinfo=dt.UTC), dt.datetime(2024, 1, 2, tzinfo=dt.UTC)),
        (dt.datetime(2024, 1, 2, tzinfo=UTC2), dt.datetime(2024, 1, 2, tzinfo=UTC2)),
        (dt.date(2024, 2, 29), dt.date(2024, 2, 29)),
        (Color.RED, 1),
        (Name.ALICE, "alice"),
        (collections.OrderedDict(a=1), {"a": 1}),
    ],
)
def test_round_trip(value: Any, expected: Any) -> None:
    result = clone(value)
    assert result == expected
    assert type(result) is type(expected)


def test_nan_round_trips() -> None:
    assert math.isnan(clone(float("nan")))


def test_aware_datetime_keeps_its_offset() -> None:
    value = clone(dt.datetime(2024, 1, 2, 12, tzinfo=UTC2))
    assert value.utcoffset() == dt.timedelta(hours=2)


def test_clone_is_deep_and_independent() -> None:
    original = {"list": [1, {"x": [2]}], "set": {1}}
    copy = clone(original)
    original["list"][1]["x"].append(3)  # type: ignore[index]
    original["set"].add(2)  # type: ignore[attr-defined]
    assert copy == {"list": [1, {"x": [2]}], "set": {1}}


def test_refused_type_uses_workerds_text() -> None:
    with pytest.raises(DataCloneError) as info:
        encode({"nested": [Foo()]})
    assert info.value.message == (
        'Could not serialize object of type "Foo". This type does not support serialization.'
    )
    assert info.value.name == "DataCloneError" and not isinstance(info.value, TypeError)
    assert isinstance(info.value, StorageError)


async def _coro() -> None:
    pass


def _generator() -> Any:
    yield 1


@pytest.mark.parametrize(
    ("make", "type_name"),
    [
        (lambda: lambda: 1, "function"),
        (lambda: Foo, "type"),
        (lambda: Foo(), "Foo"),
        (lambda: _generator(), "generator"),
        (lambda: threading.Lock(), "lock"),
        (lambda: 1j, "complex"),
        (lambda: ValueError("x"), "ValueError"),
        (lambda: math, "module"),
        (lambda: {1: object()}, "object"),
        (lambda: [dt.timedelta(1)], "timedelta"),
    ],
)
def test_refused_types(make: Any, type_name: str) -> None:
    with pytest.raises(DataCloneError, match=f'type "{type_name}"'):
        encode(make())


def test_coroutines_are_refused() -> None:
    coro = _coro()
    try:
        with pytest.raises(DataCloneError, match='type "coroutine"'):
            clone(coro)
    finally:
        coro.close()


def test_cycles_raise_instead_of_recursing() -> None:
    cyclic_list: list[Any] = []
    cyclic_list.append(cyclic_list)
    cyclic_dict: dict[str, Any] = {}
    cyclic_dict["self"] = {"inner": cyclic_dict}
    for value in (cyclic_list, cyclic_dict):
        with pytest.raises(DataCloneError, match="cycle"):
            encode(value)


def test_shared_references_are_copied_not_refused() -> None:
    shared = [1, 2]
    copy = clone({"a": shared, "b": shared})
    assert copy == {"a": [1, 2], "b": [1, 2]}


def test_decode_rejects_garbage() -> None:
    with pytest.raises(DataCloneError):
        decode(b"\xc1")


def test_encode_is_compact_for_plain_values() -> None:
    assert encode({"a": 1}) == b"\x81\xa1a\x01"
