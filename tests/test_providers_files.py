"""Files a user attached reach the model, in each provider's input format — or are refused by
name, never dropped silently (the model would answer as if it had seen them).

The turns run on a real doemu runtime against the fake providers, which check every request
against the official SDK's request type: a part in the wrong shape would be a 400, so the exact
content asserted here is also what the real APIs take.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agents.chat import AIChatAgent, ChatMessageOptions
from agents.providers import (
    AnthropicMessages,
    File,
    OpenAIChatCompletions,
    OpenAIResponses,
    ProviderInputError,
    items_from_messages,
    model_reply,
)
from agents.providers import Text as Said
from agents.providers.files import anthropic_block, chat_part, parse_data_url, responses_part
from doemu.testing.fake_providers import FakeLLM, Reply, Text
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import connect, request

PNG = b"\x89PNG\r\n\x1a\n fake image bytes"
PDF = b"%PDF-1.7 fake document"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PDF_URL = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
PROVIDERS = {
    "responses": lambda env: OpenAIResponses.from_env(env, model="m"),
    "anthropic": lambda env: AnthropicMessages.from_env(env, model="m"),
    "chat": lambda env: OpenAIChatCompletions.from_env(env, model="m"),
}
API = {"responses": "responses", "anthropic": "messages", "chat": "chat"}


class FileChat(AIChatAgent):
    kind: ClassVar[str] = "responses"

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        return model_reply(self, options, PROVIDERS[self.kind](self.env))


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


def user_message(*files: dict[str, Any]) -> dict[str, Any]:
    return {"id": "u1", "role": "user",
            "parts": [{"type": "text", "text": "what is in these?"}, *files]}  # fmt: skip


def file_part(media_type: str, url: str, filename: str | None = None) -> dict[str, Any]:
    part = {"type": "file", "mediaType": media_type, "url": url}
    return {**part, "filename": filename} if filename else part


async def turn(doemu_harness: HarnessFactory, llm: FakeLLM, kind: str, message: Any) -> Any:
    env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": f"{llm.url}/v1",
           "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": llm.url}  # fmt: skip
    cls = type(f"{kind.title()}FileChat", (FileChat,), {"kind": kind})
    h = await doemu_harness({"CHAT": cls}, vars=env)
    client = await connect(h.env.CHAT.getByName("room"), "a")
    client.send(request("r1", "", "u1", messages=[message]))
    await eventually(lambda: client.done("r1"), what="the turn's end")
    return client.done("r1")


#: The user message each adapter sends for text, a PNG and a PDF (both as data: URLs).
SENT: dict[str, Any] = {
    "responses": {"role": "user", "content": [
        {"type": "input_text", "text": "what is in these?"},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_file", "filename": "report.pdf", "file_data": PDF_URL},
    ]},
    "chat": {"role": "user", "content": [
        {"type": "text", "text": "what is in these?"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
        {"type": "file", "file": {"file_data": PDF_URL, "filename": "report.pdf"}},
    ]},
    "anthropic": {"role": "user", "content": [
        {"type": "text", "text": "what is in these?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": base64.b64encode(PNG).decode()}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": base64.b64encode(PDF).decode()}},
    ]},
}  # fmt: skip


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_an_image_and_a_pdf_reach_the_model(
    doemu_harness: HarnessFactory, llm: FakeLLM, kind: str
) -> None:
    llm.script(Reply(Text("a chart and a report")))
    message = user_message(file_part("image/png", PNG_URL),
                           file_part("application/pdf", PDF_URL, "report.pdf"))  # fmt: skip
    done = await turn(doemu_harness, llm, kind, message)
    assert not done.get("error"), done
    (sent,) = llm.requests(API[kind])
    conversation = sent["input"] if kind == "responses" else sent["messages"]
    assert conversation == [SENT[kind]]


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_a_file_the_provider_cannot_take_is_refused_by_name_before_any_request(
    doemu_harness: HarnessFactory, llm: FakeLLM, kind: str
) -> None:
    clip = file_part("video/mp4", "data:video/mp4;base64,AAAA", "clip.mp4")
    done = await turn(doemu_harness, llm, kind, user_message(clip))
    assert done.get("error") is True
    assert "cannot take the file 'clip.mp4' (video/mp4)" in done["body"]
    assert llm.requests(API[kind]) == []  # nothing was sent, nothing billed


def test_each_provider_takes_what_its_api_takes() -> None:
    web = File("user", "image/jpeg", "https://example.com/cat.jpg")
    assert responses_part("r", web) == {"type": "input_image", "image_url": web.url,
                                        "detail": "auto"}  # fmt: skip
    assert chat_part("c", web) == {"type": "image_url", "image_url": {"url": web.url}}
    assert anthropic_block("a", web) == {"type": "image", "source": {"type": "url", "url": web.url}}
    paper = File("user", "application/pdf", "https://example.com/paper.pdf", "paper.pdf")
    assert responses_part("r", paper) == {"type": "input_file", "filename": "paper.pdf",
                                          "file_url": paper.url}  # fmt: skip
    with pytest.raises(ProviderInputError, match=r"c: cannot take the file 'paper.pdf'"):
        chat_part("c", paper)  # chat completions take PDFs inline only
    wav = File("user", "audio/wav", "data:audio/wav;base64," + base64.b64encode(b"RIFF").decode())
    audio = {"data": "UklGRg==", "format": "wav"}
    assert chat_part("c", wav) == {"type": "input_audio", "input_audio": audio}
    notes = File("user", "text/plain", "data:text/plain,buy%20milk", "notes.txt")
    assert anthropic_block("a", notes) == {
        "type": "document", "title": "notes.txt",
        "source": {"type": "text", "media_type": "text/plain", "data": "buy milk"},
    }  # fmt: skip
    with pytest.raises(ProviderInputError, match="ftp"):
        responses_part("r", File("user", "image/png", "ftp://example.com/x.png"))
    with pytest.raises(ProviderInputError, match="bad data: URL"):
        anthropic_block("a", File("user", "image/png", "data:image/png;base64,@@@"))


def test_data_urls_are_read_as_rfc_2397_says() -> None:
    assert parse_data_url("https://example.com/x") is None
    plain = parse_data_url("data:,a%2Cb")
    assert plain is not None and (plain.media_type, plain.data) == ("text/plain", b"a,b")
    packed = parse_data_url("data:image/PNG;name=x.png;base64,iVBORw==")
    assert packed is not None and (packed.media_type, packed.data) == ("image/png", b"\x89PNG")
    with pytest.raises(ValueError, match="comma"):
        parse_data_url("data:image/png;base64")


def test_files_in_an_assistant_message_are_left_out() -> None:
    """No API takes a model's own file back as input; the user's files stay."""
    messages = [
        {"role": "user", "parts": [file_part("image/png", PNG_URL)]},
        {"role": "assistant", "parts": [file_part("image/png", PNG_URL), {"type": "text",
                                                                             "text": "done"}]},
    ]  # fmt: skip
    assert items_from_messages(messages) == [
        File("user", "image/png", PNG_URL), Said("assistant", "done")]  # fmt: skip
