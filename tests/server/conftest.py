"""Starts `imp serve` on the chat_tiny fixture and hands tests an official `openai` client for it.

The binary comes from $IMP_BINARY (CTest sets it) or build/cpu/bin/imp, the backend from $IMP_BACKEND. Servers listen on a free port
(--port 0; the port is read from the log) so suites can run side by side.
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx2 as httpx  # the HTTP client the openai SDK itself uses
import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "tests" / "fixtures" / "chat_tiny"
MODEL = "chat_tiny"
API_KEY = "test-key"


def imp_binary() -> str:
    return os.environ.get("IMP_BINARY", str(ROOT / "build" / "cpu" / "bin" / "imp"))


def backend() -> str:
    """$IMP_BACKEND (cpu by default; cuda on the GPU machine)."""
    return os.environ.get("IMP_BACKEND", "cpu")


class ServerProcess:
    """One `imp serve` process; its log (stderr) goes to a file the tests can read."""

    def __init__(self, *extra_args: str, api_key: str | None = API_KEY, model_dir: Path = MODEL_DIR):
        self.log_file = tempfile.NamedTemporaryFile(prefix="imp_serve_", suffix=".log", delete=False)
        args = [imp_binary(), "serve", "--model", str(model_dir), "--port", "0", "--backend", backend(), *extra_args]
        if api_key:
            args += ["--api-key", api_key]
        self.api_key = api_key
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log_file)
        self.port = self._wait_for_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._wait_ready()

    def log(self) -> str:
        return Path(self.log_file.name).read_text(errors="replace")

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            match = re.search(r"listening on http://[^:]+:(\d+)", self.log())
            if match:
                return int(match.group(1))
            if self.proc.poll() is not None:
                raise RuntimeError(f"imp serve exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.02)
        raise RuntimeError(f"imp serve did not start listening:\n{self.log()}")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if httpx.get(self.base + "/health").status_code == 200:
                return
            time.sleep(0.02)
        raise RuntimeError(f"imp serve never became ready:\n{self.log()}")

    def client(self, **kwargs) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base + "/v1", api_key=self.api_key or "none", max_retries=0, **kwargs)

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def post(self, path: str, body, **kwargs) -> httpx.Response:
        """A raw POST: a dict is sent as JSON, bytes as they are."""
        content = body if isinstance(body, (bytes, str)) else json.dumps(body)
        headers = {"Content-Type": "application/json", **self.headers()}
        return httpx.post(self.base + path, content=content, headers=headers, **{"timeout": 60, **kwargs})

    def metrics(self) -> dict[str, float]:
        text = httpx.get(self.base + "/metrics").text
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def stop(self, sig=signal.SIGTERM, timeout=30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        return self.proc.returncode


@pytest.fixture(scope="session")
def server():
    process = ServerProcess("--test-forced-output")
    yield process
    assert process.stop() == 0, process.log()


@pytest.fixture(scope="session")
def client(server):
    return server.client()


@pytest.fixture(scope="session")
def golden():
    return json.loads((MODEL_DIR / "golden.json").read_text())["chat"]


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def collect_stream(stream):
    """(content, reasoning, calls by index, finish_reason) from a streamed chat completion."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in stream:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                if delta.id:
                    call["id"] = delta.id
                    assert delta.type == "function"
                if delta.function and delta.function.name:
                    call["name"] += delta.function.name
                if delta.function and delta.function.arguments:
                    call["arguments"] += delta.function.arguments
    return content, reasoning, calls, finish
