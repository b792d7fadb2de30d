"""``request.headers`` / ``response.headers`` and the ``headers=`` argument, as on Cloudflare.

On Cloudflare's Python Workers both are an ``http.client.HTTPMessage`` (the SDK's
``HTTPMessageMapping``) built anew on each access, and ``Request``/``Response`` refuse one as
``headers=`` (observed on workerd: ``e2e/differential/test_boundary.py``). doemu does the same by
default; ``--lenient`` keeps doemu's ``Headers`` (the ``lenient`` fixture).
"""

from __future__ import annotations

import http.client
from collections.abc import Callable, Mapping

import pytest

from doemu.compat import js, workers
from doemu.compat.headers import Headers, HTTPMessageMapping
from doemu.compat.requests import Request

URL = "https://example.com/"
UNEXPECTED = "Received unexpected type for headers argument"


def incoming() -> workers.Request:
    """A request as the server builds one: a repeated header, mixed-case names."""
    pairs = [("x-test", "a"), ("x-dup", "1"), ("x-dup", "2"), ("accept", "*/*")]
    return workers.Request._from_parts(URL, "GET", Headers._trusted(pairs))


def notes(exc: BaseException) -> str:
    return "\n".join(getattr(exc, "__notes__", []))


def refusal(call: Callable[[], object]) -> TypeError:
    """The TypeError ``call()`` raises, with the SDK's exact text (doemu's advice is a note)."""
    with pytest.raises(TypeError) as info:
        call()
    assert str(info.value) == UNEXPECTED
    return info.value


# -- what request.headers / response.headers are --------------------------------------------------


def test_request_headers_is_a_new_http_message_per_access() -> None:
    request = incoming()
    h = request.headers
    assert type(h) is HTTPMessageMapping
    assert isinstance(h, http.client.HTTPMessage) and isinstance(h, Mapping)
    assert not isinstance(h, dict)
    assert request.headers is not h
    h["x-added"] = "1"
    assert request.headers.get("x-added") is None  # a copy: changing it changes nothing
    assert h.get("X-TEST") == h["X-Test"] == "a" and h["x-missing"] is None
    assert "X-TEST" in h and "x-missing" not in h
    assert h.get_all("x-dup") == ["1, 2"]  # joined, as the JS Headers has it
    assert h.keys() == ["accept", "x-dup", "x-test", "x-added"]  # JS order, then in order added
    assert h == dict(h)


def test_setting_a_header_adds_one_and_del_removes_all() -> None:
    h = incoming().headers
    h["x-set"] = "1"
    h["X-Set"] = "2"
    h["x-test"] = "again"
    assert h.get_all("x-set") == ["1", "2"] and h["x-set"] == "1"
    assert h.get_all("x-test") == ["a", "again"]
    del h["x-set"]
    assert h.get_all("x-set") is None


def test_response_headers_keep_each_set_cookie() -> None:
    response = workers.Response(
        "x",
        headers=[("x-multi", "1"), ("x-multi", "2"), ("set-cookie", "a=1"), ("set-cookie", "b=2")],
    )
    h = response.headers
    assert type(h) is HTTPMessageMapping
    assert h.get_all("x-multi") == ["1, 2"]
    assert h.get_all("set-cookie") == ["a=1", "b=2"]
    assert h.get("Content-Type") == "text/plain;charset=UTF-8"
    assert response.headers is not h


# -- headers= --------------------------------------------------------------------------------------


def test_request_refuses_an_http_message_with_the_sdk_text_and_advice() -> None:
    request = incoming()
    with pytest.raises(TypeError) as info:
        Request(request, headers=request.headers)
    assert str(info.value) == UNEXPECTED
    assert "list(headers.items())" in notes(info.value)
    assert "HTTPMessageMapping" in notes(info.value)
    for refused in ((("x-a", "1"),), None, http.client.HTTPMessage()):
        refusal(lambda: Request(URL, headers=refused))  # noqa: B023 - called at once


@pytest.mark.parametrize(
    "accepted",
    [
        pytest.param(lambda h: dict(h), id="dict-of-it"),
        pytest.param(lambda h: list(h.items()), id="pairs"),
        pytest.param(lambda h: Headers(list(h.items())), id="js-headers"),
        pytest.param(lambda h: js.Headers.new(dict(h)), id="js.Headers.new"),
    ],
)
def test_request_takes_a_dict_a_list_or_js_headers(accepted: object) -> None:
    request = incoming()
    built = Request(request, headers=accepted(request.headers))  # type: ignore[operator]
    assert built.headers.get("x-test") == "a"
    assert Request(request).headers.get_all("x-dup") == ["1, 2"]


def test_response_refuses_a_truthy_http_message_only() -> None:
    built = workers.Response("x", headers={"x-a": "1"})
    with pytest.raises(TypeError) as info:
        workers.Response("x", headers=built.headers)
    assert str(info.value) == UNEXPECTED and "list(headers.items())" in notes(info.value)
    refusal(lambda: workers.Response.json({}, headers=built.headers))
    refusal(lambda: workers.Response("x", headers=(("x-a", "1"),)))
    # The SDK only looks at a truthy headers=: an empty HTTPMessage (or "") passes.
    empty: object = http.client.HTTPMessage()
    for falsy in (empty, ""):
        assert workers.Response("x", headers=falsy).headers.get("x-a") is None  # type: ignore[arg-type]
    assert (
        workers.Response("x", headers={k: v for k, v in built.headers.items()}).headers["x-a"]
        == "1"
    )
    assert workers.Response("x", headers=list(built.headers.items())).headers["x-a"] == "1"


def test_fetch_refuses_an_http_message_as_cloudflare_cannot_convert_it() -> None:
    """``fetch(url, headers=request.headers)`` is a fatal Pyodide error on Cloudflare (the isolate
    aborts, observed on workerd); doemu raises its text, and the note says how bad it is there."""
    request = incoming()
    with pytest.raises(TypeError) as info:
        Request._for_fetch(URL, {"headers": request.headers})
    assert str(info.value) == "Incorrect type: the provided value is not of type 'Sequence'."
    assert "fatal" in notes(info.value) and "list(headers.items())" in notes(info.value)
    # to_js converts a tuple, so fetch takes one (Request() does not); None is no headers.
    assert Request._for_fetch(URL, {"headers": (("x-a", "1"),)}).headers["x-a"] == "1"
    assert Request._for_fetch(URL, {"headers": None}).headers.items() == []
    assert Request._for_fetch(URL, {"headers": {"x-a": "1"}}).headers["x-a"] == "1"


# -- --lenient: doemu's Headers, which headers= takes ----------------------------------------------


def test_lenient_headers_are_doemus_headers(lenient: None) -> None:
    request = incoming()
    h = request.headers
    assert type(h) is Headers
    h["x-test"] = "replaced"  # Headers replaces
    assert h.get_all("x-test") == ["replaced"]
    assert Request(request, headers=request.headers).headers.get("x-test") == "a"
    assert Request(URL, headers=None).headers.get("x-test") is None
    message = HTTPMessageMapping()
    message["x-a"] = "1"
    assert workers.Response("x", headers=message).headers.get("x-a") == "1"
    assert Request._for_fetch(URL, {"headers": message}).headers.get("x-a") == "1"
