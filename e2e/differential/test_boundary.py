"""The JavaScript boundary's rules on doemu and on workerd: the same code, the same failure.

Cloudflare runs Python Workers in Pyodide, and its boundary with JavaScript refuses code CPython
accepts. doemu applies the same rules by default (``doemu/compat/boundary.py``, the storage and
RPC layers), so a mistake shows locally. Each test runs one rule through ``apps/boundary`` (one
endpoint per rule, answering what the code observed) and asserts the same observation on both
targets: the exception's kind (``JsException`` or not, ``TypeError`` or not), its JS name and its
exact text — doemu's advice is a note under the traceback, never in the text.

What legitimately differs is normalised here, and said where: a remote traceback's frames
(workerd adds its SDK's ``introspection.py`` frames, file paths differ), and doemu's own log
lines where Cloudflare is silent (a function handed to ``waitUntil``, ``ws.send(bytes)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from doemu.testing.workerd import WorkerdStartError
from tests.polling import eventually_sync

from ..targets import TargetServer, close_and_await, start_server
from .conftest import running

APP = Path(__file__).resolve().parent / "apps" / "boundary"

#: workerd's log line when a coroutine or a task reaches JavaScript as a borrowed proxy.
BORROWED = (
    "This borrowed proxy was automatically destroyed at the end of a function call. "
    "Try using create_proxy or create_once_callable."
)


@pytest.fixture(scope="module")
def boundary(serve: Any) -> TargetServer:
    server: TargetServer = serve(APP)
    return server


def case(server: TargetServer, path: str, **params: str) -> Any:
    answer = httpx.get(f"{running(server).url}{path}", params=params, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def js_error(name: str, text: str) -> dict[str, Any]:
    """A JavaScript error raised into Python: ``pyodide.ffi.JsException``, never a TypeError."""
    return {
        "raised": True,
        "js": True,
        "name": name,
        "type_error": False,
        "attribute_error": False,
        "os_error": False,
        "value_error": False,
        "text": f"{name}: {text}",
    }


def python_error(text: str, *, kind: str = "type_error") -> dict[str, Any]:
    """A plain Python exception (the SDK's own conversions raise these)."""
    flags = dict.fromkeys(("type_error", "attribute_error", "os_error", "value_error"), False)
    flags[kind] = True
    return {"raised": True, "js": False, "name": None, **flags, "text": text}


def new_lines(server: TargetServer, since: int) -> str:
    return "\n".join(server.lines[since:])


# -- entropy at import ---------------------------------------------------------------------------

ENTRY = """import random

{line}

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("loaded")
"""


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            "RNG = random.Random()",
            "OSError: [Errno 29] Cannot get entropy outside of request context",
        ),
        (
            "X = random.random()",
            "RuntimeError: Cannot use random.random() outside of request context",
        ),
    ],
    ids=["Random()", "random()"],
)
def test_entropy_at_import_fails_the_worker_load(
    target: str, tmp_path: Path, line: str, error: str
) -> None:
    """A module-level random source: the Worker does not load (workerd exits before listening;
    ``doemu dev`` exits 1), and both print the same error line."""
    project = tmp_path / "entropy"
    (project / "src").mkdir(parents=True)
    (project / "wrangler.toml").write_text(
        'name = "entropy"\nmain = "src/entry.py"\ncompatibility_date = "2026-11-01"\n'
        'compatibility_flags = ["python_workers"]\n'
    )
    (project / "src" / "entry.py").write_text(ENTRY.format(line=line))
    expected = WorkerdStartError if target == "workerd" else RuntimeError
    with pytest.raises(expected) as info:
        server = start_server(target, project, tmp_path / "state")
        server.kill()
    lines = str(info.value).splitlines()
    assert error in lines, str(info.value)
    assert f"    {line}" in lines  # the user's line is in the traceback


# -- waitUntil -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "runs", "logged"),
    [
        ("coroutine", False, True),  # a borrowed proxy: never runs
        ("task", True, True),  # scheduled already, so it runs; not kept alive; logged
        ("function", False, False),  # ignored without a word (doemu adds a warning)
        ("workers_coroutine", False, True),  # workers.waitUntil is not patched either
        ("proxied_task", True, False),  # create_proxy(ensure_future(...)): the working form
    ],
)
def test_durable_object_wait_until(
    boundary: TargetServer, target: str, variant: str, runs: bool, logged: bool
) -> None:
    """1. The object hands a job to waitUntil in one way, then a control job that works.
    2. Once the control ran, the variant's job ran or not as on Cloudflare, and the
       borrowed-proxy error was logged or not."""
    name = f"wu-{variant}-{target}"
    since = len(running(boundary).lines)
    answer = case(boundary, "/do/waituntil", variant=variant, name=name)
    assert answer == {"call": {"raised": False, "value": "NoneType"}}  # waitUntil returns None
    markers = eventually_sync(
        lambda: (m := case(boundary, "/do/markers", name=name)) and f"control-{variant}" in m and m,
        within=15,
        what="the control job to run",
    )
    assert (variant in markers) is runs, markers
    if logged:
        eventually_sync(
            lambda: BORROWED in new_lines(boundary, since), within=10, what="the borrowed-proxy log"
        )
    else:
        assert BORROWED not in new_lines(boundary, since)
    if variant == "function" and target == "doemu":
        assert "which Cloudflare ignores without a word" in new_lines(boundary, since)


def test_entry_worker_wait_until_runs_a_coroutine(boundary: TargetServer, target: str) -> None:
    """The SDK patches the entry worker's waitUntil (not a Durable Object's): a coroutine runs."""
    name = f"wu-entry-{target}"
    assert case(boundary, "/worker/waituntil", name=name) == {"handed": True}
    eventually_sync(
        lambda: case(boundary, "/do/markers", name=name) == ["worker"],
        within=15,
        what="the entry worker's job to run",
    )


# -- WebSockets and attachments ------------------------------------------------------------------


def test_accept_websocket_wants_an_array(boundary: TargetServer, target: str) -> None:
    """tags as a Python list: JsException TypeError; to_js(list): accepted, tags as given."""
    answer = case(boundary, "/do/accept_list", name=f"tags-{target}")
    assert answer == {
        "list": js_error(
            "TypeError",
            "Failed to execute 'acceptWebSocket' on 'DurableObjectState': "
            "parameter 2 is not of type 'Array'.",
        ),
        "to_js": {"raised": False, "value": "NoneType"},
        "tags": [["room"]],
    }


def test_attachments_are_javascript_values(boundary: TargetServer, target: str) -> None:
    """1. Nothing attached: ``jsnull`` (falsy, not None, ``or {}`` works, json.dumps → null).
    2. A dict: DataCloneError, and the attachment is unchanged.
    3. to_js(dict, Object.fromEntries): a JS object — not subscriptable, attributes, to_py()."""
    answer = case(boundary, "/do/attachments", name=f"att-{target}")
    assert answer == {
        "nothing": {
            "kind": "jsnull",
            "is_none": False,
            "falsy": True,
            "or_default": {},
            "json": "null",
        },
        "dict": js_error("DataCloneError", "[object Object] could not be cloned."),
        "after_refusal": "jsnull",
        "object": {
            "kind": "JsProxy",
            "subscript": python_error("'pyodide.ffi.JsProxy' object is not subscriptable"),
            "attribute": 1,
            "to_py": 1,
        },
    }


#: workerd's log line when a socket's close reaches a class without ``webSocketClose``.
MISSING_CLOSE = "Method webSocketClose does not exist"


def test_ws_send_bytes_arrives_as_text(boundary: TargetServer, target: str) -> None:
    """ws.send(bytes) sends a TEXT frame holding str(bytes), with no error; to_js(bytes) sends
    binary. doemu also says so in its log, once per place (Cloudflare is silent)."""
    since = len(running(boundary).lines)
    with connect(f"{boundary.ws_url}/ws?name=send-{target}", open_timeout=30) as ws:
        ws.send("bytes")
        assert ws.recv(timeout=10) == "b'\\x01\\x02bytes'"
        ws.send("binary")
        assert ws.recv(timeout=10) == b"\x01\x02bytes"
        # The probe has no webSocketClose (see the next test): the close is done once logged.
        close_and_await(
            ws, lambda: MISSING_CLOSE in new_lines(boundary, since), what="the close to be handled"
        )
    if target == "doemu":
        assert "ws.send() was given a Python bytes" in new_lines(boundary, since)


def test_a_missing_socket_handler_fails_the_event(boundary: TargetServer, target: str) -> None:
    """The probe has no webSocketClose: a client's close is logged as "TypeError: Method
    webSocketClose does not exist" (the SDK's wrapper has every handler and finds none)."""
    since = len(running(boundary).lines)
    with connect(f"{boundary.ws_url}/ws?name=close-{target}", open_timeout=30) as ws:
        ws.send("binary")
        assert ws.recv(timeout=10) == b"\x01\x02bytes"
        close_and_await(
            ws,
            lambda: MISSING_CLOSE in new_lines(boundary, since),
            what="the missing handler to be logged",
        )


# -- RPC -----------------------------------------------------------------------------------------


def remote_traceback(text: str, head: str) -> tuple[str, str]:
    """The first and last lines of a traceback sent across RPC. The frames in between differ
    (workerd adds the SDK's ``introspection.py`` and ``rpc.py`` frames; file paths differ)."""
    lines = text.rstrip("\n").splitlines()
    assert lines[0] == head, text
    return lines[0], lines[-1]


def test_rpc_values_cross_as_javascript_values(boundary: TargetServer, target: str) -> None:
    """1. A dict argument and a dict result arrive as JsDict (attributes work, nested too).
    2. bytes arrive as a memoryview.
    3. A tuple argument: the SDK's TypeError at the caller. A tuple result: the caller gets a
       JsException PythonError whose text is the callee's traceback."""
    answer = case(boundary, "/worker/rpc", name=f"rpc-{target}")
    tuple_result = answer.pop("tuple_result")
    assert answer == {
        "dict_arg": "JsDict",
        "dict_result": {"kind": "JsDict", "attribute": 1, "nested": "JsDict"},
        "returned_dict": "JsDict",
        "bytes": {"kind": "memoryview", "value": "ab"},
        "tuple_arg": python_error("<class 'tuple'> cannot be sent over RPC."),
    }
    text = tuple_result.pop("text")
    assert tuple_result == {k: v for k, v in js_error("PythonError", "").items() if k != "text"}
    assert remote_traceback(text, "PythonError: Traceback (most recent call last):")[1] == (
        "TypeError: <class 'tuple'> cannot be sent over RPC."
    )


def test_exceptions_through_rpc_and_fetch(boundary: TargetServer, target: str) -> None:
    """1. A method that raises ValueError: the caller gets a JsException PythonError (not a
       ValueError) carrying the remote traceback.
    2. A fetch() that raises: the caller's stub.fetch raises an OSError with the traceback."""
    answer = case(boundary, "/worker/rpc_error", name=f"err-{target}")
    rpc, fetch = answer["rpc"], answer["fetch"]
    rpc_text, fetch_text = rpc.pop("text"), fetch.pop("text")
    assert rpc == {k: v for k, v in js_error("PythonError", "").items() if k != "text"}
    assert remote_traceback(rpc_text, "PythonError: Traceback (most recent call last):")[1] == (
        "ValueError: boom value"
    )
    assert '    raise ValueError("boom value")' in rpc_text.splitlines()
    assert fetch == {k: v for k, v in python_error("", kind="os_error").items() if k != "text"}
    assert remote_traceback(fetch_text, "Traceback (most recent call last):")[1] == (
        "ValueError: Callee.fetch raised on purpose"
    )


# -- env -----------------------------------------------------------------------------------------


def test_env_is_read_by_name_only(boundary: TargetServer) -> None:
    """dir(env) lists only what this instance read; a missing binding is AttributeError with its
    name; env cannot be iterated or searched; text vars are str, JSON vars JS objects."""
    assert case(boundary, "/worker/env") == {
        "listed_before_read": False,
        "listed_after_read": True,
        "missing": python_error("MISSING", kind="attribute_error"),
        "hasattr": [True, False],
        "iter": python_error("'_EnvWrapper' object is not iterable"),
        "in": python_error("argument of type '_EnvWrapper' is not a container or iterable"),
        "text_var": "str",
        "json_var": {"retries": 3},
    }


# -- storage and SQL -----------------------------------------------------------------------------


def test_sql_binds_ints_as_javascript_numbers(boundary: TargetServer, target: str) -> None:
    """A Python int is a JS number: REAL (``typeof(?)``, ``? / 2`` = 2.5), stored as an integer
    in an INTEGER column; from ±(2**53 - 1) on it is a BigInt, refused; a stored integer beyond
    2**53 reads back as a float."""
    bigint = js_error("TypeError", "Cannot convert a BigInt value to a number")
    assert case(boundary, "/do/sql_ints", name=f"ints-{target}") == {
        "typeof": "real",
        "half": 2.5,
        "column": {"raised": False, "value": "ok"},
        "stored": {"t": "integer", "n": 7},
        "below_limit": {"raised": False, "value": 2**53 - 2},
        "at_limit": bigint,
        "negative_limit": bigint,
        "big_read_back": "float",
    }


def test_cursor_is_iterable_not_an_iterator(boundary: TargetServer, target: str) -> None:
    """next(cursor) fails; cursor.next() is JavaScript's {done, value}; iteration goes on."""
    assert case(boundary, "/do/cursor", name=f"cursor-{target}") == {
        "next_builtin": python_error("'_BindingWrapper' object is not an iterator"),
        "next_method": {"kind": "JsDict", "done": False, "value": {"a": 1}},
        "rest": [{"a": 2}],
    }


def test_get_alarm_is_an_int(boundary: TargetServer, target: str) -> None:
    """getAlarm() returns epoch milliseconds as an int (doemu once gave a float)."""
    answer = case(boundary, "/do/alarm", name=f"alarm-{target}")
    assert answer == {"kind": "int", "value": 4_102_444_800_000}


def test_an_alarm_without_a_handler_fails_when_it_fires(
    boundary: TargetServer, target: str
) -> None:
    """A class without alarm() may set one (the SDK's JS wrapper has alarm()); when it fires,
    "TypeError: Method alarm does not exist" is logged and the alarm retried."""
    since = len(running(boundary).lines)
    assert case(boundary, "/do/alarm_soon", name=f"no-handler-{target}") == {"set": True}
    eventually_sync(
        lambda: "Method alarm does not exist" in new_lines(boundary, since),
        within=15,
        what="the failed alarm to be logged",
    )


def test_javascript_errors_are_not_python_type_errors(boundary: TargetServer, target: str) -> None:
    """setAlarm("soon"), acceptWebSocket("x"), idFromString("bad"): JsException with the JS
    error's name and workerd's text; ``except TypeError`` does not catch them."""
    assert case(boundary, "/do/js_errors", name=f"errors-{target}") == {
        "set_alarm": js_error(
            "TypeError",
            "Failed to execute 'setAlarm' on 'DurableObjectStorage': "
            "parameter 1 is not of type 'date'.",
        ),
        "accept_string": js_error(
            "TypeError",
            "Failed to execute 'acceptWebSocket' on 'DurableObjectState': "
            "parameter 1 is not of type 'WebSocket'.",
        ),
        "bad_id": js_error("TypeError", "Invalid Durable Object ID: must be 64 hex digits"),
    }


def test_storage_values_come_back_as_js_dicts(boundary: TargetServer, target: str) -> None:
    """A stored dict reads back as a JsDict (nested too; attributes work); put(k, tuple) is the
    SDK's TypeError at the call."""
    assert case(boundary, "/do/storage_values", name=f"kv-{target}") == {
        "kind": "JsDict",
        "attribute": 1,
        "nested": "JsDict",
        "tuple": python_error("<class 'tuple'> cannot be sent over RPC."),
    }


def test_ids_compare_with_equals_and_are_unhashable(boundary: TargetServer, target: str) -> None:
    """Two ids of one name are not ``==`` (JS objects) but ``equals()``; hash() fails."""
    assert case(boundary, "/do/ids", name=f"ids-{target}") == {
        "equal": False,
        "equals": True,
        "same": True,
        "hash": python_error("unhashable type: 'pyodide.ffi.JsProxy'"),
        "str": True,
    }


# -- request.headers / response.headers -----------------------------------------------------------

#: What ``/headers/*`` cases send: a repeated header arrives joined, as the JS ``Headers`` has it.
SENT = [("X-Test", "a"), ("X-Dup", "1"), ("X-Dup", "2")]
UNEXPECTED_HEADERS = python_error("Received unexpected type for headers argument")


def headers_case(server: TargetServer, name: str) -> Any:
    answer = httpx.get(f"{running(server).url}/headers/{name}", headers=SENT, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_request_headers_is_an_http_message(boundary: TargetServer, target: str) -> None:
    """``request.headers`` is the SDK's HTTPMessageMapping (an ``http.client.HTTPMessage`` and a
    ``Mapping``, not a dict), a new one per access (changing it changes nothing); reads are
    case-insensitive, a missing name is None, a repeated header one joined value."""
    assert headers_case(boundary, "type") == {
        "mro": [
            "HTTPMessageMapping",
            *("HTTPMessage", "Message", "Mapping", "Collection", "Sized", "Iterable"),
            *("Container", "object"),
        ],
        "http_message": True,
        "mapping": True,
        "dict": False,
        "fresh_per_access": True,
        "mutation_kept": None,
        "get": ["a", "a", "a", None],
        "get_default": "d",
        "contains": [True, False],
        "repeated": [["1, 2"], "1, 2"],
        "keys": ["x-dup", "x-test"],
        "items": [["x-dup", "1, 2"], ["x-test", "a"]],
        "as_dict": {"x-dup": "1, 2", "x-test": "a"},
        "equals_dict": True,
    }


def test_setting_a_header_adds_one(boundary: TargetServer, target: str) -> None:
    """``h[name] = value`` twice gives two headers (email.message), over an existing one too;
    ``del h[name]`` removes them all."""
    assert headers_case(boundary, "setitem") == {
        "set": [["1", "2"], "1"],
        "over_existing": ["a", "again"],
        "deleted": None,
    }


def test_request_refuses_an_http_message_as_headers(boundary: TargetServer, target: str) -> None:
    """``Request(request, headers=request.headers)``: the SDK's TypeError (a tuple and None too);
    a dict of it, its items as a list, a plain dict: accepted."""
    assert headers_case(boundary, "request_arg") == {
        "message": UNEXPECTED_HEADERS,
        "message_new_url": UNEXPECTED_HEADERS,
        "dict_of_it": {"raised": False, "value": "a"},
        "pairs": {"raised": False, "value": "a"},
        "dict": {"raised": False, "value": "d"},
        "tuple": UNEXPECTED_HEADERS,
        "none": UNEXPECTED_HEADERS,
        "request_from_request": {"raised": False, "value": "a"},
    }


def test_response_refuses_an_http_message_as_headers(boundary: TargetServer, target: str) -> None:
    """``Response("x", headers=response.headers)`` and ``Response.json``: the same TypeError; an
    empty HTTPMessage passes (the SDK skips a falsy headers=); dict and list of pairs work."""
    assert headers_case(boundary, "response_arg") == {
        "message": UNEXPECTED_HEADERS,
        "empty_message": {"raised": False, "value": None},
        "dict_of_it": {"raised": False, "value": "1"},
        "pairs": {"raised": False, "value": "1"},
        "tuple": UNEXPECTED_HEADERS,
        "json": UNEXPECTED_HEADERS,
    }


def test_response_headers_of_built_and_fetched_responses(
    boundary: TargetServer, target: str
) -> None:
    """``response.headers`` is an HTTPMessage too, for a Response built in Python and for one
    ``fetch`` returned: repeated values joined, each Set-Cookie its own header, a str body's
    default content type."""
    message = ["HTTPMessageMapping", "HTTPMessage", "Message"]
    assert headers_case(boundary, "fetched") == {
        "fetched": {
            "mro": message,
            "multi": ["1, 2"],
            "cookies": ["a=1", "b=2"],
            "content_type": "text/plain",
        },
        "built": {
            "mro": message,
            "multi": ["1, 2"],
            "cookies": None,
            "content_type": "text/plain;charset=UTF-8",
        },
    }
