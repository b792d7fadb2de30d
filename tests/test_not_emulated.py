"""Cloudflare-only APIs fail as "not emulated", not as typos (issue 30, item 6)."""

from __future__ import annotations

from typing import Any

import pytest
from workers import DurableObject

from doemu.errors import NotEmulatedError
from doemu.testing.plugin import HarnessFactory


class Probe(DurableObject):
    async def attempt(self, owner: str, name: str) -> list[Any]:
        target = self.ctx if owner == "ctx" else self.ctx.storage
        try:
            getattr(target, name)
        except NotEmulatedError as exc:
            return ["not emulated", str(exc), hasattr(target, name)]
        except AttributeError as exc:
            return ["AttributeError", str(exc), hasattr(target, name)]
        return ["present", "", True]


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        ("ctx", "props"),
        ("ctx", "exports"),
        ("ctx", "container"),
        ("storage", "getCurrentBookmark"),
        ("storage", "getBookmarkForTime"),
        ("storage", "onNextSessionRestoreBookmark"),
    ],
)
async def test_a_cloudflare_only_api_is_named_as_not_emulated(
    doemu_harness: HarnessFactory, owner: str, name: str
) -> None:
    h = await doemu_harness({"PROBE": Probe})
    kind, message, present = await h.env.PROBE.getByName("p").attempt(owner, name)
    assert kind == "not emulated" and present is False  # an AttributeError: hasattr is False
    assert f".{name} is a Cloudflare API that doemu does not emulate" in message


async def test_a_typo_stays_a_plain_attribute_error(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"PROBE": Probe})
    kind, message, _ = await h.env.PROBE.getByName("p").attempt("ctx", "acceptWebsocket")
    assert kind == "AttributeError" and "acceptWebsocket" in message
    kind, message, _ = await h.env.PROBE.getByName("p").attempt("storage", "gett")
    assert kind == "AttributeError" and "gett" in message


async def test_a_missing_binding_names_the_ones_that_exist(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"PROBE": Probe}, vars={"GREETING": "hi"})
    with pytest.raises(
        AttributeError, match=r"no binding or variable 'CACHE'; it has: GREETING, PROBE"
    ):
        h.env.CACHE  # noqa: B018
    assert getattr(h.env, "CACHE", None) is None
