"""``FormData`` imports the email parser when a multipart body is decoded, not with the module.

The Workers surface (what every worker imports) imports :mod:`doemu.compat.formdata`, and the
email package's parser and policies are a few milliseconds of every start-up; only decoding a
``multipart/form-data`` body needs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from workers import File, FormData, Request


def test_importing_formdata_leaves_the_email_parser_for_the_first_multipart_body() -> None:
    """A fresh interpreter (this one may have imported the parser already)."""
    code = textwrap.dedent(
        """
        import asyncio
        import json
        import sys

        import doemu.compat.formdata
        from doemu.compat.requests import Request

        parser = ("email.parser", "email.policy")
        before = [name for name in parser if name in sys.modules]
        form = doemu.compat.formdata.FormData({"a": "1"})
        request = Request("http://x/", method="POST", body=form)
        decoded = asyncio.run(request.form_data())
        after = [name for name in parser if name in sys.modules]
        print(json.dumps([before, after, decoded["a"]]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == [[], ["email.parser", "email.policy"], "1"]


async def test_a_multipart_body_round_trips() -> None:
    form = FormData({"name": "doemu · ✓"})
    form.append("file", File([b"\x00\x01 bytes"], "a b.bin", "application/octet-stream"))
    form.append("name", "second")
    decoded = await Request("http://x/", method="POST", body=form).form_data()
    assert decoded.get_all("name") == ["doemu · ✓", "second"]
    upload = decoded["file"]
    assert isinstance(upload, File)
    assert (upload.name, upload.content_type) == ("a b.bin", "application/octet-stream")
    assert await upload.bytes() == b"\x00\x01 bytes"
