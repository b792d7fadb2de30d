"""The async KV API (get/put/delete/list), the sync ``storage.kv`` and KV limits."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from doemu.errors import DataCloneError, LimitExceededError, StorageError
from doemu.storage import ObjectStorage, StorageTypeError

from .settled import settled

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
LIST_BOTH_STARTS = "list() cannot be called with both start and startAfter values."
LIST_LIMIT_POSITIVE = "List limit must be positive."
MAX_KEYS = "Maximum number of keys is 128."
MAX_PAIRS = "Maximum number of pairs is 128."
PUT_SIGNATURE = (
    "put() may only be called with a single key-value pair and optional options as put(key, "
    "value, options) or with multiple key-value pairs and optional options as put(entries, "
    "options)"
)
PUT_UNDEFINED = "put() called with undefined value."
STORAGE_CLOSED = "This object's storage is closed (the object was evicted or reset)."

# -- get / put / delete --------------------------------------------------------------------------


async def test_get_put_delete_one_key(storage: ObjectStorage) -> None:
    assert await storage.get("missing") is None
    assert await storage.put("a", {"n": 1}) is None
    assert await storage.get("a") == {"n": 1}
    assert await storage.delete("a") is True
    assert await storage.delete("a") is False
    assert await storage.get("a") is None


async def test_batches(storage: ObjectStorage) -> None:
    await storage.put({"b": 2, "a": 1, "c": 3})
    result = await storage.get(["c", "zz", "a", "b", "a"])
    assert result == {"a": 1, "b": 2, "c": 3}
    assert list(result) == ["a", "b", "c"]  # key order, missing keys left out
    assert await storage.delete(["a", "zz", "c", "a"]) == 2
    assert await storage.list() == {"b": 2}
    assert await storage.get([]) == {}
    assert await storage.delete([]) == 0


async def test_values_are_copies(storage: ObjectStorage) -> None:
    value = {"list": [1]}
    await storage.put("k", value)
    value["list"].append(2)
    got = await storage.get("k")
    assert got == {"list": [1]}
    got["list"].append(3)
    assert await storage.get("k") == {"list": [1]}


ROUND_TRIP: list[Any] = [
    0,
    -(2**70),
    1.25,
    float("inf"),
    "",
    "ünïcode",
    b"\x00bytes",
    [1, "two", [3.0]],
    (1, 2),
    {"nested": {"deep": [None, True]}},
    {1, 2},
    dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC),
    dt.date(2024, 5, 6),
    False,
]


@pytest.mark.parametrize("value", ROUND_TRIP)
async def test_values_round_trip_through_the_file(
    open_storage: Callable[..., ObjectStorage], value: Any
) -> None:
    first = open_storage("rt.sqlite")
    await first.put("k", value)
    first.close()
    second = open_storage("rt.sqlite")
    expected = list(value) if isinstance(value, tuple) else value
    assert await second.get("k") == expected


class Unclonable:
    pass


async def test_refused_values_do_not_write(storage: ObjectStorage) -> None:
    with pytest.raises(DataCloneError, match='type "Unclonable"'):
        await storage.put("k", Unclonable())
    with pytest.raises(DataCloneError):
        await storage.put({"ok": 1, "bad": [lambda: 1]})
    with pytest.raises(DataCloneError):
        storage.kv.put("k", Unclonable())
    assert await storage.list() == {}


async def test_none_is_a_value_and_a_missing_value_is_undefined(storage: ObjectStorage) -> None:
    await storage.put("k", None)
    assert await storage.list() == {"k": None}
    with pytest.raises(StorageTypeError) as info:
        await storage.put("k")
    assert info.value.message == PUT_UNDEFINED
    await storage.put({"a": None, "b": 1})
    assert await storage.get(["a", "b"]) == {"a": None, "b": 1}
    await storage.put("n", [None])
    assert await storage.get("n") == [None]


async def test_put_with_options(storage: ObjectStorage) -> None:
    await storage.put("k", 1, {"allowUnconfirmed": True})
    await storage.put({"j": 2}, {"noCache": True})
    assert await storage.list() == {"j": 2, "k": 1}
    with pytest.raises(StorageTypeError) as info:
        await storage.put({"j": 2}, 5)
    assert info.value.message == PUT_SIGNATURE


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get(5),
        lambda s: s.get(["a", 5]),
        lambda s: s.put(5, 1),
        lambda s: s.put({5: 1}),
        lambda s: s.delete(None),
        lambda s: s.delete({"a"}),
    ],
)
async def test_keys_must_be_strings(storage: ObjectStorage, call: Any) -> None:
    with pytest.raises(StorageTypeError):
        await call(storage)


async def test_unawaited_put_still_writes(storage: ObjectStorage) -> None:
    storage.put("fire-and-forget", 1)
    storage.delete("nothing")
    assert settled(storage.get("fire-and-forget")) == 1
    await storage.sync()
    other = sqlite3.connect(storage.database_path)
    assert other.execute("SELECT count(*) FROM _cf_KV").fetchone()[0] == 1
    other.close()


async def test_errors_are_delivered_when_awaited(storage: ObjectStorage) -> None:
    pending = storage.put("k")  # does not raise here, like a rejected promise
    with pytest.raises(StorageTypeError):
        await pending


async def test_closed_storage(storage: ObjectStorage) -> None:
    storage.close()
    storage.close()  # idempotent
    assert storage.closed
    with pytest.raises(StorageError) as info:
        await storage.get("k")
    assert info.value.message == STORAGE_CLOSED
    with pytest.raises(StorageError):
        storage.kv.get("k")
    with pytest.raises(StorageError):
        storage.sql.exec("SELECT 1")


# -- list ----------------------------------------------------------------------------------------

KEYS = ["a", "ab", "abc", "abd", "b", "ba", "c"]


@pytest.fixture
async def listed(storage: ObjectStorage) -> ObjectStorage:
    await storage.put({key: key.upper() for key in KEYS})
    return storage


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, KEYS),
        ({"start": "ab"}, ["ab", "abc", "abd", "b", "ba", "c"]),
        ({"startAfter": "ab"}, ["abc", "abd", "b", "ba", "c"]),
        ({"end": "b"}, ["a", "ab", "abc", "abd"]),
        ({"start": "ab", "end": "b"}, ["ab", "abc", "abd"]),
        ({"prefix": "ab"}, ["ab", "abc", "abd"]),
        ({"prefix": "b"}, ["b", "ba"]),
        ({"prefix": "zz"}, []),
        ({"prefix": ""}, KEYS),
        ({"prefix": "ab", "start": "abc"}, ["abc", "abd"]),
        ({"prefix": "ab", "start": "a"}, ["ab", "abc", "abd"]),
        ({"prefix": "ab", "start": "b"}, []),
        ({"prefix": "ab", "startAfter": "abc"}, ["abd"]),
        ({"prefix": "ab", "end": "abd"}, ["ab", "abc"]),
        ({"prefix": "ab", "end": "zzz"}, ["ab", "abc", "abd"]),
        ({"prefix": "ab", "end": "aa"}, []),
        ({"start": "b", "end": "b"}, []),
        ({"start": "c", "end": "a"}, []),
        ({"reverse": True}, KEYS[::-1]),
        ({"reverse": True, "limit": 2}, ["c", "ba"]),
        ({"limit": 3}, ["a", "ab", "abc"]),
        ({"limit": 2.0}, ["a", "ab"]),
        ({"prefix": "ab", "reverse": True, "limit": 2}, ["abd", "abc"]),
        ({"start": "ab", "end": "b", "reverse": True}, ["abd", "abc", "ab"]),
        ({"start": None, "limit": None}, KEYS),
        ({"allowConcurrency": True, "noCache": True}, KEYS),
    ],
)
async def test_list_options(
    listed: ObjectStorage, options: dict[str, Any], expected: list[str]
) -> None:
    result = await listed.list(options)
    assert list(result) == expected
    assert all(result[key] == key.upper() for key in result)
    assert list(await listed.list(**options)) == expected
    assert [key for key, _ in listed.kv.list(options)] == expected


async def test_list_merges_dict_and_keywords(listed: ObjectStorage) -> None:
    assert list(await listed.list({"prefix": "ab"}, limit=1)) == ["ab"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"start": "a", "startAfter": "b"}, LIST_BOTH_STARTS),
        ({"limit": 0}, LIST_LIMIT_POSITIVE),
        ({"limit": -5}, LIST_LIMIT_POSITIVE),
        ({"limit": 1.5}, 'list() option "limit" must be an integer'),
        ({"limit": float("nan")}, 'list() option "limit" must be an integer'),
        ({"limit": "10"}, 'list() option "limit" must be a number, got "str"'),
        ({"limit": True}, 'list() option "limit" must be a number, got "bool"'),
        ({"start": 1}, 'list() option "start" must be a string, got "int"'),
        ({"startAfter": b"a"}, 'list() option "startAfter" must be a string, got "bytes"'),
        ({"end": ["x"]}, 'list() option "end" must be a string, got "list"'),
        ({"prefix": 2}, 'list() option "prefix" must be a string, got "int"'),
        ({"reverse": "yes"}, 'list() option "reverse" must be a bool, got "str"'),
        ({"start_after": "a"}, 'list() got an unknown option "start_after"'),
    ],
)
async def test_list_option_errors(
    listed: ObjectStorage, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(StorageTypeError) as info:
        await listed.list(options)
    assert info.value.message.startswith(message)
    assert info.value.name == "TypeError" and not isinstance(info.value, TypeError)
    with pytest.raises(StorageTypeError):
        listed.kv.list(**options)


async def test_keys_sort_by_utf8_bytes(storage: ObjectStorage) -> None:
    # UTF-8 byte order differs from UTF-16 (JavaScript string) order for astral characters.
    keys = ["😀", "\uffff", "é", "z", "Z", "a", "\u4e2d", "", "a\0b", "a\0"]
    await storage.put({key: i for i, key in enumerate(keys)})
    expected = sorted(keys, key=lambda key: key.encode())
    assert list(await storage.list()) == expected
    assert expected.index("\uffff") < expected.index("😀")
    assert list(await storage.list(prefix="a")) == ["a", "a\0", "a\0b"]
    assert list(await storage.list(startAfter="a")) == expected[expected.index("a") + 1 :]
    assert list(await storage.get(keys)) == expected


async def test_prefix_of_maximal_code_points(storage: ObjectStorage) -> None:
    await storage.put(
        {"\U0010ffff": 1, "\U0010ffff\U0010ffffx": 2, "\ud7ff": 3, "\ud7ffa": 4, "\ue000": 5}
    )
    assert list(await storage.list(prefix="\U0010ffff")) == ["\U0010ffff", "\U0010ffff\U0010ffffx"]
    assert list(await storage.list(prefix="\ud7ff")) == ["\ud7ff", "\ud7ffa"]


# -- synchronous KV ------------------------------------------------------------------------------


def test_sync_kv(storage: ObjectStorage) -> None:
    kv = storage.kv
    assert kv.get("k") is None
    kv.put("k", [1, 2])
    kv.put("none", None)
    assert kv.get("k") == [1, 2]
    assert list(kv.list()) == [("k", [1, 2]), ("none", None)]
    assert kv.delete("k") is True
    assert kv.delete("k") is False
    for key, value in kv.list(prefix="n"):
        assert (key, value) == ("none", None)
    with pytest.raises(StorageTypeError):
        kv.get(1)  # type: ignore[arg-type]


async def test_sync_and_async_share_data(storage: ObjectStorage) -> None:
    storage.kv.put("shared", 1)
    assert await storage.get("shared") == 1
    await storage.put("other", 2)
    assert storage.kv.get("other") == 2


# -- limits --------------------------------------------------------------------------------------


async def test_limits_off_by_default(storage: ObjectStorage) -> None:
    big_key = "k" * 5000
    await storage.put(big_key, b"x" * 300_000)
    await storage.put({f"k{i}": i for i in range(200)})
    assert len(await storage.get([f"k{i}" for i in range(200)])) == 200
    assert await storage.delete([f"k{i}" for i in range(200)]) == 200
    assert len(await storage.get(big_key)) == 300_000


async def test_key_size_limit(limited: ObjectStorage) -> None:
    ok_key = "é" * 1024  # 2048 UTF-8 bytes
    await limited.put(ok_key, 1)
    too_big = ok_key + "x"
    for call in (limited.get, limited.delete, lambda k: limited.put(k, 1)):
        with pytest.raises(LimitExceededError) as info:
            await call(too_big)
        assert info.value.message == "Keys cannot be larger than 2048 bytes."
        assert info.value.name == "RangeError" and not isinstance(info.value, ValueError)
    with pytest.raises(LimitExceededError) as batch:
        await limited.put({"ok": 1, too_big: 2})
    assert batch.value.message == f'Key "{too_big}" is larger than the limit of 2048 bytes.'
    with pytest.raises(LimitExceededError, match="is larger than the limit"):
        await limited.delete(["ok", too_big])
    with pytest.raises(LimitExceededError, match="Keys cannot be larger"):
        limited.kv.put(too_big, 1)


async def test_value_size_limit(limited: ObjectStorage) -> None:
    await limited.put("ok", b"x" * (128 * 1024))  # the advertised maximum fits
    with pytest.raises(LimitExceededError) as info:
        await limited.put("big", b"x" * (128 * 1024 + 100))
    assert info.value.message == "Values cannot be larger than 131072 bytes."
    with pytest.raises(LimitExceededError) as batch:
        await limited.put({"big": "x" * 200_000})
    assert batch.value.message == 'Value for key "big" is above the limit of 131072 bytes.'
    assert await limited.list() == {"ok": b"x" * (128 * 1024)}


async def test_batch_count_limit(limited: ObjectStorage) -> None:
    keys = [f"k{i:03d}" for i in range(129)]
    await limited.put({key: 1 for key in keys[:128]})
    with pytest.raises(LimitExceededError) as pairs:
        await limited.put({key: 1 for key in keys})
    assert pairs.value.message == MAX_PAIRS
    for call in (limited.get, limited.delete):
        with pytest.raises(LimitExceededError) as info:
            await call(keys)
        assert info.value.message == MAX_KEYS
    assert len(await limited.get(keys[:128])) == 128


def test_public_names_are_exported() -> None:
    import doemu.storage

    for name in doemu.storage.__all__:
        assert getattr(doemu.storage, name) is not None
    assert "ObjectStorage" in doemu.storage.__all__
