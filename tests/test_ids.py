"""Ids: workerd's derivation vectors, validation errors, names."""

from __future__ import annotations

import pytest

from doemu.errors import InvalidIdError
from doemu.ids import DurableObjectId, IdFactory, is_hex_id

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
INVALID_ID_FOREIGN = "Durable Object ID is not valid for this namespace."
INVALID_ID_HEX = "Invalid Durable Object ID: must be 64 hex digits"

FOO = "8d8d52167eba73e7f0268ab71258e747f36d3bda25975c74ec438beeadb76dd6"
BAR = "2caa716bd34e4a78cd24ea59e3fa4180b9c8fc1872aa01aaaa473bffc0863b43"


def test_id_from_name_matches_workerd_vectors() -> None:
    ids = IdFactory("my-worker-Counter")
    assert str(ids.from_name("foo")) == FOO
    assert ids.from_name("bar").toString() == BAR
    assert ids.from_name("foo").name == "foo"


def test_new_unique_id_is_valid_for_its_namespace_only() -> None:
    ids = IdFactory("my-worker-Counter")
    other = IdFactory("my-worker-Other")
    uid = ids.new_unique()
    assert uid.name is None
    assert is_hex_id(str(uid)) and str(uid) == str(uid).lower()
    assert ids.from_string(str(uid)).equals(uid)
    assert ids.new_unique() != uid
    with pytest.raises(InvalidIdError, match=INVALID_ID_FOREIGN):
        other.from_string(str(uid))


@pytest.mark.parametrize("text", ["", "abc", FOO[:-1], FOO + "0", "g" * 64, FOO[:-1] + " "])
def test_id_from_string_rejects_non_hex(text: str) -> None:
    with pytest.raises(InvalidIdError) as info:
        IdFactory("my-worker-Counter").from_string(text)
    assert info.value.message == INVALID_ID_HEX
    assert info.value.name == "TypeError" and not isinstance(info.value, TypeError)


def test_id_from_string_rejects_foreign_and_accepts_uppercase() -> None:
    ids = IdFactory("my-worker-Counter")
    with pytest.raises(InvalidIdError) as info:
        ids.from_string("0" * 64)
    assert info.value.message == INVALID_ID_FOREIGN
    upper = ids.from_string(FOO.upper())
    assert str(upper) == FOO
    assert upper.equals(ids.from_name("foo"))
    assert upper.name is None


def test_ids_compare_with_equals_and_cannot_be_keys() -> None:
    """workerd: an id is a JS object — ``==`` is identity, ``hash()`` fails; ``equals`` and
    ``str(id)`` are the portable forms."""
    a = DurableObjectId(FOO, "foo")
    b = DurableObjectId(FOO.upper())
    assert a.equals(b) and a != b and a == a and str(a) == str(b)
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_lenient_ids_compare_and_hash_by_hex(lenient: None) -> None:
    a = DurableObjectId(FOO, "foo")
    b = DurableObjectId(FOO.upper())
    assert a == b and hash(a) == hash(b)
    assert not a.equals(FOO)
    assert "name='foo'" in repr(a)
