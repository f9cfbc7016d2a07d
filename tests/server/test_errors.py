"""Every error path answers with the right status and an OpenAI-style body naming the problem."""
import httpx2 as httpx  # the HTTP client the openai SDK itself uses
import openai
import pytest

from conftest import MODEL, WEATHER_TOOL

HI = [{"role": "user", "content": "hi"}]


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize("body, param, words", [
    (b'{"model": "chat_tiny", "messages": [', None, "not valid JSON"),
    (b'[1, 2]', None, "must be a JSON object"),
    (b'{"model": "chat_tiny", "messages": [{"role": "user", "content": "\xff\xfe"}]}', None, "not valid UTF-8"),
    (b'{"model": "chat_tiny", "messages": [{"role": "user", "content": "\\ud800"}]}', None, "not valid UTF-8"),
    (b'{"model": "chat_tiny", "messages": ' + b"[" * 100 + b"]" * 100 + b"}", None, "nests deeper"),
])
def test_malformed_bodies(server, body, param, words):
    error = error_of(server.post("/v1/chat/completions", body), 400)
    assert words in error["message"]
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("fields, param, words", [
    ({"messages": []}, "messages", "non-empty array"),
    ({"messages": "hi"}, "messages", "non-empty array"),
    ({"messages": [{"content": "hi"}]}, "messages[0].role", "required"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "wizard"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content", "got integer"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content[0].type", "not supported"),
    ({"temperature": "hot"}, "temperature", "must be a number, got string"),
    ({"temperature": 7}, "temperature", "[0, 2]"),
    ({"top_p": 0}, "top_p", "(0, 1]"),
    ({"max_tokens": 0}, "max_tokens", "[1,"),
    ({"max_tokens": 2.5}, "max_tokens", "must be an integer"),
    ({"presence_penalty": 3}, "presence_penalty", "[-2, 2]"),
    ({"n": 2}, "n", "must be 1"),
    ({"stream": "yes"}, "stream", "boolean"),
    ({"stream_options": {"include_usage": True}}, "stream_options", "only allowed when 'stream' is true"),
    ({"stop": [1]}, "stop", "string"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
    ({"top_logprobs": 2}, "top_logprobs", "needs 'logprobs'"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "[0, 20]"),
    ({"tools": {"name": "f"}}, "tools", "must be an array"),
    ({"tools": [{"type": "function", "function": {}}]}, "tools[0].function.name", "non-empty string"),
    ({"tool_choice": "sometimes"}, "tool_choice", "sometimes"),
    ({"tool_choice": "required"}, "tool_choice", "needs 'tools'"),
    ({"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "'nope'"),
    ({"chat_template_kwargs": [1]}, "chat_template_kwargs", "must be an object"),
    ({"response_format": {"type": "json_object"}}, "response_format", "not supported"),
    ({"model": "gpt-4o"}, "model", "gpt-4o"),
    ({"model": None}, "model", "required"),
])
def test_invalid_fields_name_the_field(server, fields, param, words):
    body = {"model": MODEL, "messages": HI, **fields}
    body = {k: v for k, v in body.items() if v is not None}
    error = error_of(server.post("/v1/chat/completions", body), 400)
    assert error["param"] == param
    assert words in error["message"]


def test_sdk_raises_bad_request_with_the_message(client):
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="not-served", messages=HI)
    assert raised.value.status_code == 400
    assert "not-served" in raised.value.message
    assert raised.value.code == "model_not_found"


def test_prompt_longer_than_the_context(client):
    long_text = "word " * 5000  # the context of chat_tiny is 4096 tokens
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": long_text}], max_tokens=1)
    assert raised.value.code == "context_length_exceeded"
    assert "context length is 4096" in raised.value.message


def test_max_tokens_beyond_the_context(client):
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=HI, max_tokens=5000)
    assert raised.value.code == "context_length_exceeded"
    assert "max_tokens 5000" in raised.value.message


def test_template_errors_are_bad_requests(client):
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=HI, max_tokens=1,
                                       extra_body={"chat_template_kwargs": {"messages": []}})
    assert raised.value.code == "template_error"
    assert "cannot set 'messages'" in raised.value.message


def test_missing_and_wrong_api_keys(server):
    response = httpx.post(server.base + "/v1/chat/completions", json={"model": MODEL, "messages": HI})
    assert "missing API key" in error_of(response, 401)["message"]
    with pytest.raises(openai.AuthenticationError) as raised:
        openai.OpenAI(base_url=server.base + "/v1", api_key="wrong", max_retries=0).models.list()
    assert raised.value.status_code == 401
    assert raised.value.code == "invalid_api_key"
    # Probes stay open.
    assert httpx.get(server.base + "/health").json() == {"status": "ok"}


def test_unknown_route_is_404_json(server):
    error = error_of(httpx.get(server.base + "/v1/nothing", headers=server.headers()), 404)
    assert "no route" in error["message"]


def test_completions_errors(server):
    base = {"model": MODEL}
    assert "required" in error_of(server.post("/v1/completions", base), 400)["message"]
    assert "one prompt" in error_of(server.post("/v1/completions", {**base, "prompt": ["a", "b"]}), 400)["message"]
    assert "outside the vocabulary" in error_of(server.post("/v1/completions", {**base, "prompt": [1, 99999]}), 400)["message"]
    assert "echo" in error_of(server.post("/v1/completions", {**base, "prompt": "a", "echo": True}), 400)["message"]
    assert "[0, 5]" in error_of(server.post("/v1/completions", {**base, "prompt": "a", "logprobs": 9}), 400)["message"]
