"""A local HTTP server that answers the Gemini REST API, and an OpenAI-compatible chat route, the
way the real services do, so the gemini editor and the judges are tested through the real
`google-genai` client (and plain HTTP), over a real socket.

Each request takes the next entry of `script` (then `image`): `image` mirrors the input image
and adds a thought summary (the next of `thoughts`, then THOUGHT) and a reply (`crop:F` first
cuts fraction F off its width, as Nano Banana Pro crops; `size:WxH` first resizes it to W×H); a
question without an image (a judge's) is answered with `judge(question)`; `text` answers with
text only; `block` refuses the prompt; `hang` never answers; `drop` closes the connection
unanswered; an int is that HTTP error, with the API's error body. POST .../chat/completions is
the OpenAI-compatible route: a chat completion whose content is `judge(question)` (`block`: a
refusal, null content and REFUSAL as its `refusal`). Every request
body, path and header set (names in lower case) is kept.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image, ImageOps

KEY = "AIzaFAKE-secret-key-0123456789"
"""A fake API key: tests check it never reaches a message or a file."""
THOUGHT = "**Checking the image** I see faint noise."
REPLY = "Here is the replica."
REFUSAL = "I can only describe this image."
BLOCK = {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": "The prompt was blocked."}


@dataclass
class Stub:
    url: str
    script: list[str | int] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    error_message: str = "stub error"
    thoughts: list[str] = field(default_factory=list)
    judge: Callable[[str], str] = field(default=lambda question: "NO")
    delay: float = 0.0  # seconds before each answer, so that a kill can land mid-request

    def sent_image(self, index: int) -> bytes:
        """The PNG bytes request `index` carried."""
        parts = self.requests[index]["contents"][0]["parts"]
        data = next(p["inlineData"]["data"] for p in parts if "inlineData" in p)
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))  # the SDK sends it unpadded


def question_of(body: dict[str, Any]) -> str | None:
    """The text of a Gemini request that carries no image (a judge's question), else None."""
    parts = body["contents"][0]["parts"]
    return None if any("inlineData" in p for p in parts) else "".join(p.get("text", "") for p in parts)


def _chat_answer(stub: Stub, body: dict[str, Any], action: str | int) -> tuple[int, dict[str, Any]]:
    """An OpenAI chat completion, or an OpenAI-style error body, in their full shapes."""
    if isinstance(action, int):
        error = {"message": stub.error_message, "type": "invalid_request_error", "param": None, "code": None}
        return action, {"error": error}
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": REFUSAL}  # action "block"
    if action != "block":
        message = {
            "role": "assistant",
            "content": stub.judge(body["messages"][0]["content"]),
            "refusal": None,
        }
    return 200, {
        "id": f"chatcmpl-stub{len(stub.requests)}",
        "object": "chat.completion",
        "created": 1764547200,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 1, "total_tokens": 121},
        "system_fingerprint": "fp_stub",
    }


def _answer(stub: Stub, body: dict[str, Any], action: str | int) -> tuple[int, dict[str, Any]]:
    if isinstance(action, int):
        status = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 500: "INTERNAL"}.get(
            action, "INVALID_ARGUMENT"
        )
        return action, {"error": {"code": action, "message": stub.error_message, "status": status}}
    if action == "block":
        return 200, {"promptFeedback": BLOCK}
    question = question_of(body)
    if action == "text" or question is not None:
        text = REFUSAL if question is None else stub.judge(question)
        content = {"role": "model", "parts": [{"text": text}]}
        return 200, {"candidates": [{"content": content, "finishReason": "STOP", "index": 0}]}
    png = Image.open(io.BytesIO(stub.sent_image(len(stub.requests) - 1)))
    if action.startswith("crop:"):
        png = png.crop((0, 0, round(png.width * (1 - float(action[5:]))), png.height))
    if action.startswith("size:"):
        width, height = (int(n) for n in action[5:].split("x"))
        png = png.resize((width, height))
    out = io.BytesIO()
    ImageOps.mirror(png).save(out, format="PNG")
    thought = stub.thoughts.pop(0) if stub.thoughts else THOUGHT
    parts = [
        {"text": thought, "thought": True},
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(out.getvalue()).decode()}},
        {"text": REPLY},
    ]
    return 200, {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stub.requests.append(body)
            stub.paths.append(self.path)
            stub.headers.append({k.lower(): v for k, v in self.headers.items()})
            time.sleep(stub.delay)
            action = stub.script.pop(0) if stub.script else "image"
            if action == "hang":
                stub.released.wait(30)
                return
            if action == "drop":
                self.close_connection = True
                return
            chat = self.path.endswith("/chat/completions")
            status, answer = (_chat_answer if chat else _answer)(stub, body, action)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve(script: list[str | int] | None = None) -> Iterator[Stub]:
    """A stub listening on 127.0.0.1 for the duration of the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub := Stub("")))
    server.daemon_threads = True
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    stub.script = list(script or [])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.released.set()
        server.shutdown()
        server.server_close()
