"""The import finishes, whatever happens to the process. Run with chaos to prove it:

pytest                                                  # all three agents pass
pytest --doemu-chaos-reset=0.2 --doemu-chaos-seed=1     # only Importer passes
"""

import pytest
from entry import PAGES, ForgetfulImporter, Importer, NaiveImporter

from doemu.errors import ObjectResetError


async def retrying(call, attempts=50):
    """Call an object again when it was reset under the call, as a real client would."""
    for _ in range(attempts - 1):
        try:
            return await call()
        except ObjectResetError:
            pass
    return await call()


AGENTS = [Importer, NaiveImporter, ForgetfulImporter]


@pytest.mark.parametrize("agent", AGENTS, ids=["recovering", "naive", "forgetful"])
async def test_the_import_finishes(doemu_harness, agent):
    h = await doemu_harness({"IMPORTER": agent})
    job = h.env.IMPORTER.getByName("weekly")
    await retrying(job.start)
    for _ in range(120):  # two simulated minutes
        progress = await retrying(job.progress)
        if progress["done"]:
            break
        await h.advance(1_000)  # heartbeat alarms wake the agent after a crash
    assert progress == {"pages": list(range(PAGES)), "done": True}
