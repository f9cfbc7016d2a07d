#!/usr/bin/env python3
"""Load test for `imp serve`: many concurrent clients, mixed streaming and not, random cancellations and
malformed requests. Every request must get exactly one well-formed answer (success, 4xx or 503) within its
deadline, the server must never crash or stall, and its memory must return to the baseline afterwards.

By default it starts its own server on tests/fixtures/chat_tiny (loopback, a free port) and stops it with
SIGTERM at the end (which must drain and exit 0). Prints a JSON summary; exits 1 when any check fails.

    python3 scripts/load_test.py                      # 64 clients x 20 requests
    python3 scripts/load_test.py --clients 16 --requests 5
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2 as httpx  # the HTTP client of the openai SDK (tests/requirements.txt)

ROOT = Path(__file__).resolve().parents[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Server:
    def __init__(self, args):
        self.log = tempfile.NamedTemporaryFile(prefix="imp_load_", suffix=".log", delete=False)
        cmd = [args.binary, "serve", "--model", args.model, "--port", "0", "--max-queue", str(args.max_queue),
               "--request-timeout", str(args.request_timeout), "--api-key", "load-test"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            match = re.search(r"listening on (http://[^ ]+)", Path(self.log.name).read_text())
            if match:
                self.base = match.group(1)
                break
            if self.proc.poll() is not None:
                raise RuntimeError(Path(self.log.name).read_text())
            time.sleep(0.05)
        while httpx.get(self.base + "/health").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("server not ready")
            time.sleep(0.05)

    def text(self) -> str:
        return Path(self.log.name).read_text(errors="replace")


HEADERS = {"Authorization": "Bearer load-test", "Content-Type": "application/json"}
MESSAGES = [[{"role": "user", "content": "Tell me about the sea."}],
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there!"}],
            [{"role": "user", "content": "Count to ten. " * 20}]]

# Malformed requests and what part of the error message proves the server understood the problem.
MALFORMED = [
    (b'{"model": "chat_tiny", "messages": [', "not valid JSON"),
    (b'{"model": "chat_tiny", "messages": [{"role": "user", "content": "\xff"}]}', "UTF-8"),
    (json.dumps({"model": "chat_tiny", "messages": []}).encode(), "messages"),
    (json.dumps({"model": "chat_tiny", "messages": MESSAGES[0], "temperature": "hot"}).encode(), "temperature"),
    (json.dumps({"model": "nope", "messages": MESSAGES[0]}).encode(), "nope"),
    (json.dumps({"model": "chat_tiny", "messages": MESSAGES[0], "max_tokens": 10 ** 6}).encode(), "max_tokens"),
    (json.dumps({"model": "chat_tiny", "messages": MESSAGES[0], "n": 3}).encode(), "'n'"),
]


def check_error(response: httpx.Response, status: int | None = None) -> str | None:
    if status is not None and response.status_code != status:
        return f"expected {status}, got {response.status_code}: {response.text[:200]}"
    try:
        error = response.json()["error"]
        assert isinstance(error["message"], str) and error["message"]
        assert set(error) == {"message", "type", "param", "code"}
    except Exception as exc:  # noqa: BLE001 - any shape problem is a failure
        return f"malformed error body ({exc}): {response.text[:200]}"
    if response.status_code == 503 and response.headers.get("Retry-After") is None:
        return "503 without Retry-After"
    return None


def check_completion(body: dict, chat: bool) -> str | None:
    try:
        choice = body["choices"][0]
        assert choice["finish_reason"] in ("stop", "length", "tool_calls")
        if chat:
            assert choice["message"]["role"] == "assistant"
        else:
            assert isinstance(choice["text"], str)
        usage = body["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    except Exception as exc:  # noqa: BLE001
        return f"malformed completion ({exc!r}): {json.dumps(body)[:200]}"
    return None


def check_stream(lines: list[str], chat: bool) -> str | None:
    data = [line[6:] for line in lines if line.startswith("data: ")]
    if not data or data[-1] != "[DONE]":
        return f"stream without [DONE]: {lines[-3:]}"
    finish = None
    for item in data[:-1]:
        chunk = json.loads(item)
        if "error" in chunk:
            return f"stream error event: {item[:200]}"
        for choice in chunk["choices"]:
            finish = choice.get("finish_reason") or finish
    if finish not in ("stop", "length", "tool_calls"):
        return f"stream without a finish_reason: {data[-3:]}"
    return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.failures: list[str] = []
        self.latencies: list[float] = []
        self.ttfts: list[float] = []

    def add(self, kind: str, latency: float, failure: str | None = None, ttft: float | None = None):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.latencies.append(latency)
            if ttft is not None:
                self.ttfts.append(ttft)
            if failure:
                self.failures.append(f"{kind}: {failure}")


def one_request(client: httpx.Client, base: str, rng: random.Random, stats: Stats, deadline_s: float):
    roll = rng.random()
    start = time.monotonic()
    if roll < 0.1:  # malformed
        body, words = rng.choice(MALFORMED)
        response = client.post(base + "/v1/chat/completions", content=body, headers=HEADERS, timeout=deadline_s)
        failure = check_error(response, 400)
        if failure is None and words not in response.json()["error"]["message"]:
            failure = f"error does not name the problem ({words}): {response.text[:200]}"
        return stats.add("malformed_400", time.monotonic() - start, failure)

    chat = rng.random() < 0.75
    stream = rng.random() < 0.5
    cancel = rng.random() < 0.1
    body = {"model": "chat_tiny", "max_tokens": rng.randint(1, 64), "temperature": rng.choice([0, 0.7, 1.0]),
            "seed": rng.randint(0, 1000), "ignore_eos": rng.random() < 0.5, "stream": stream}
    if chat:
        body["messages"] = rng.choice(MESSAGES)
        path = "/v1/chat/completions"
    else:
        body["prompt"] = "Once upon a time"
        path = "/v1/completions"
    if stream and rng.random() < 0.5:
        body["stream_options"] = {"include_usage": True}

    if cancel:
        # Walk away mid-answer: a stream after its first lines, a plain request after a short timeout.
        if stream:
            with client.stream("POST", base + path, json=body, headers=HEADERS, timeout=deadline_s) as response:
                if response.status_code == 200:
                    for i, _ in enumerate(response.iter_lines()):
                        if i >= 2:
                            break
        else:
            try:
                client.post(base + path, json=body, headers=HEADERS, timeout=0.05)
            except httpx.TimeoutException:
                pass
        return stats.add("cancelled", time.monotonic() - start)

    if stream:
        lines, ttft = [], None
        with client.stream("POST", base + path, json=body, headers=HEADERS, timeout=deadline_s) as response:
            if response.status_code != 200:
                response.read()
                failure = check_error(response)
                return stats.add(f"stream_{response.status_code}", time.monotonic() - start, failure)
            for line in response.iter_lines():
                if ttft is None and line.startswith("data: "):
                    ttft = time.monotonic() - start
                lines.append(line)
        return stats.add("stream_200", time.monotonic() - start, check_stream(lines, chat), ttft)

    response = client.post(base + path, json=body, headers=HEADERS, timeout=deadline_s)
    if response.status_code != 200:
        return stats.add(f"plain_{response.status_code}", time.monotonic() - start, check_error(response))
    return stats.add("plain_200", time.monotonic() - start, check_completion(response.json(), chat))


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.environ.get("IMP_BINARY", str(ROOT / "build/cpu/bin/imp")))
    parser.add_argument("--model", default=str(ROOT / "tests/fixtures/chat_tiny"))
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=20, help="per client")
    parser.add_argument("--max-queue", type=int, default=16, help="small, so that some requests meet a full queue")
    parser.add_argument("--request-timeout", type=float, default=60, help="the server's per-request deadline")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--memory-slack-kib", type=int, default=16384,
                        help="how far above the warm baseline the idle RSS may settle")
    args = parser.parse_args()

    server = Server(args)
    stats = Stats()
    deadline_s = args.request_timeout + 15  # the server's deadline plus time to write the answer
    try:
        # Warm-up at full concurrency, then the baseline: every HTTP thread the load will use has run once
        # (thread stacks and allocator state exist), so what stays above it afterwards is a leak.
        warm = Stats()

        def warm_up(index: int):
            with httpx.Client() as client:
                for i in range(2):
                    one_request(client, server.base, random.Random(10 ** 6 + 2 * index + i), warm, deadline_s)

        warmers = [threading.Thread(target=warm_up, args=(i,)) for i in range(args.clients)]
        for t in warmers:
            t.start()
        for t in warmers:
            t.join()
        time.sleep(2.0)  # the server trims freed memory after a second of idleness
        baseline = rss_kib(server.proc.pid)

        def client_loop(index: int):
            rng = random.Random(args.seed * 1000 + index)
            with httpx.Client() as client:
                for _ in range(args.requests):
                    try:
                        one_request(client, server.base, rng, stats, deadline_s)
                    except Exception as exc:  # noqa: BLE001 - no answer at all is the worst failure
                        stats.add("no_answer", deadline_s, f"{type(exc).__name__}: {exc}")

        start = time.monotonic()
        peak = baseline
        threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak = max(peak, rss_kib(server.proc.pid))
            if server.proc.poll() is not None:
                stats.failures.append(f"server exited with {server.proc.returncode}")
                break
            time.sleep(0.1)
        for t in threads:
            t.join()
        wall = time.monotonic() - start

        # Afterwards: nothing running or queued, healthy, memory back near the baseline.
        settle = time.monotonic() + 10
        metrics = {}
        while time.monotonic() < settle:
            text = httpx.get(server.base + "/metrics").text
            metrics = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
            if float(metrics["imp_running_sequences"]) == 0 and float(metrics["imp_queue_depth"]) == 0:
                break
            time.sleep(0.1)
        else:
            stats.failures.append(f"still busy 10 s after the load: {metrics}")
        time.sleep(2.0)
        after = rss_kib(server.proc.pid)
        if after > baseline + args.memory_slack_kib:
            stats.failures.append(f"RSS {after} KiB did not return to the baseline {baseline} KiB")
        if httpx.get(server.base + "/health").status_code != 200:
            stats.failures.append("unhealthy after the load")
    finally:
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=60)
    if code != 0:
        stats.failures.append(f"SIGTERM exit status {code}")

    total = args.clients * args.requests
    answered = sum(stats.counts.values())
    if answered != total:
        stats.failures.append(f"{answered} answers for {total} requests")
    over = [x for x in stats.latencies if x > deadline_s]
    if over:
        stats.failures.append(f"{len(over)} requests over their {deadline_s} s deadline")
    summary = {
        "clients": args.clients, "requests": total, "wall_s": round(wall, 1),
        "requests_per_s": round(total / wall, 1), "outcomes": dict(sorted(stats.counts.items())),
        "latency_s": {"p50": round(percentile(stats.latencies, 0.5), 3), "p99": round(percentile(stats.latencies, 0.99), 3),
                      "max": round(max(stats.latencies), 3)},
        "stream_ttft_s": {"p50": round(percentile(stats.ttfts, 0.5), 3), "p99": round(percentile(stats.ttfts, 0.99), 3)},
        "rss_kib": {"baseline": baseline, "peak": peak, "after": after},
        "generated_tokens": float(metrics.get("imp_generation_tokens_total", 0)),
        "mean_batch": round(float(metrics.get("imp_batched_sequences_total", 0)) /
                            max(1.0, float(metrics.get("imp_forward_batches_total", 1))), 2),
        "failures": stats.failures[:20], "failure_count": len(stats.failures),
    }
    print(json.dumps(summary, indent=2))
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
