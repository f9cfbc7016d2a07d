"""tool_choice enforcement. `required` and a named function end the prompt with the model's tool-call opening
(closing a thought the generation prompt opened), and the output parser reads that opening + the generated
text. chat_tiny's template is Qwen3's (JSON calls); a copy of the folder with the Flash-Next template covers the
XML form. chat_tiny's greedy text is no call, so full round trips force the continuation (imp_forced_output)."""
import json
import shutil

import pytest

from conftest import MODEL, MODEL_DIR, ROOT, WEATHER_TOOL, ServerProcess, collect_stream

MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
ARGUMENTS = {"city": "Paris", "days": 3}

JSON_REQUIRED = '<tool_call>\n{"name": "'
JSON_NAMED = JSON_REQUIRED + 'get_weather", "arguments": '
JSON_CONTINUATION = {"required": 'get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>',
                     "named": '{"city": "Paris", "days": 3}}\n</tool_call>'}

XML_REQUIRED = "<tool_call>\n<function="
XML_NAMED = XML_REQUIRED + "get_weather>\n"
XML_PARAMETERS = "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
XML_CONTINUATION = {"required": "get_weather>\n" + XML_PARAMETERS, "named": XML_PARAMETERS}

CHOICES = {"required": "required", "named": NAMED}


def chat(client, model=MODEL, stream=False, forced=None, **kwargs):
    kwargs.setdefault("tools", [WEATHER_TOOL])
    kwargs.setdefault("max_tokens", 64)
    extra = {"imp_forced_output": forced} if forced is not None else {}
    extra.update(kwargs.pop("extra_body", {}))
    return client.chat.completions.create(model=model, messages=kwargs.pop("messages", MESSAGES), stream=stream,
                                          extra_body=extra, **kwargs)


def prompt_tokens(client, model=MODEL, **kwargs):
    return chat(client, model, forced="x", **kwargs).usage.prompt_tokens


def text_tokens(client, text, model=MODEL):
    """How many tokens the server's tokenizer makes of text (a plain completion's prompt)."""
    return client.completions.create(model=model, prompt=text, max_tokens=1).usage.prompt_tokens


def assert_forced_call(client, model, choice, continuation):
    """A forced continuation completes the opening into one get_weather call, streamed and not."""
    response = chat(client, model, tool_choice=choice, forced=continuation)
    result = response.choices[0]
    assert result.finish_reason == "tool_calls"
    assert result.message.content is None
    assert getattr(result.message, "reasoning_content", None) is None
    [call] = result.message.tool_calls
    assert call.type == "function" and call.id and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == ARGUMENTS

    content, reasoning, calls, finish = collect_stream(chat(client, model, stream=True, tool_choice=choice,
                                                            forced=continuation))
    assert (content, reasoning, finish) == ("", "", "tool_calls")
    assert list(calls) == [0] and calls[0]["id"] and calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == ARGUMENTS
    return response


def test_none_keeps_tools_out_of_the_prompt(client):
    without_tools = prompt_tokens(client, tools=None)
    assert prompt_tokens(client, tool_choice="none") == without_tools
    assert prompt_tokens(client, tool_choice="auto") > without_tools


def test_forced_opening_is_part_of_the_prompt(client):
    auto = prompt_tokens(client, tool_choice="auto")
    assert prompt_tokens(client, tool_choice="required") == auto + text_tokens(client, JSON_REQUIRED)
    assert prompt_tokens(client, tool_choice=NAMED) == auto + text_tokens(client, JSON_NAMED)


@pytest.mark.parametrize("kind", ["required", "named"])
def test_greedy_answer_starts_from_the_opening(client, kind):
    """chat_tiny's greedy continuation: a call if it happens to complete one, else content that begins with the
    forced opening (the parser hands malformed calls back as text); streaming says the same."""
    opening = JSON_REQUIRED if kind == "required" else JSON_NAMED
    response = chat(client, tool_choice=CHOICES[kind], temperature=0, max_tokens=24)
    result = response.choices[0]
    if result.message.tool_calls:
        assert result.finish_reason == "tool_calls"
    else:
        assert result.message.content.startswith(opening)
        assert result.finish_reason in ("stop", "length")
    content, _, calls, finish = collect_stream(chat(client, stream=True, tool_choice=CHOICES[kind], temperature=0,
                                                    max_tokens=24))
    assert finish == result.finish_reason
    assert content == (result.message.content or "")
    assert len(calls) == len(result.message.tool_calls or [])


@pytest.mark.parametrize("kind", ["required", "named"])
def test_forced_json_call_round_trip(client, kind):
    response = assert_forced_call(client, MODEL, CHOICES[kind], JSON_CONTINUATION[kind])
    call = response.choices[0].message.tool_calls[0]
    follow_up = MESSAGES + [response.choices[0].message.model_dump(exclude_none=True),
                            {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 21})}]
    answer = chat(client, messages=follow_up, forced="It is 21 C in Paris.")
    assert answer.choices[0].message.content == "It is 21 C in Paris."
    assert answer.choices[0].finish_reason == "stop"


def test_malformed_continuation_is_content(client):
    text = JSON_REQUIRED + "get_weather, oops"
    response = chat(client, tool_choice="required", forced="get_weather, oops")
    assert response.choices[0].message.tool_calls is None
    assert response.choices[0].message.content == text
    assert response.choices[0].finish_reason == "stop"
    content, _, calls, finish = collect_stream(chat(client, stream=True, tool_choice="required",
                                                    forced="get_weather, oops"))
    assert (content, calls, finish) == (text, {}, "stop")


def test_stop_string_cuts_only_generated_text(client):
    """A stop string that the opening contains does not cut the forced part."""
    response = chat(client, tool_choice="required", forced=JSON_CONTINUATION["required"], stop=["<tool_call>"])
    assert response.choices[0].message.tool_calls[0].function.name == "get_weather"


XML_MODEL = "chat_tiny_xml"


@pytest.fixture(scope="module")
def xml_client(tmp_path_factory):
    """chat_tiny with the Flash-Next template (XML calls, thinking on by default: `<think>\\n` ends the prompt)."""
    folder = tmp_path_factory.mktemp("xml_model")
    for path in MODEL_DIR.iterdir():
        (folder / path.name).symlink_to(path)
    shutil.copy(ROOT / "tests" / "fixtures" / "templates" / "flash_next" / "chat_template.jinja", folder)
    server = ServerProcess("--test-forced-output", "--served-model-name", XML_MODEL, model_dir=folder)
    yield server.client()
    assert server.stop() == 0, server.log()


def test_xml_opening_follows_a_closed_thought(xml_client):
    """Thinking on renders `<think>\\n`; a forced call closes it empty first, exactly as thinking off renders it
    (reasoning_effort medium: the system prompt is the same either way)."""
    effort = {"reasoning_effort": "medium"}
    thinking_off = prompt_tokens(xml_client, XML_MODEL, tool_choice="auto",
                                 extra_body={"chat_template_kwargs": {**effort, "enable_thinking": False}})
    thinking_on = {"chat_template_kwargs": effort}
    assert prompt_tokens(xml_client, XML_MODEL, tool_choice="required", extra_body=thinking_on) == \
        thinking_off + text_tokens(xml_client, XML_REQUIRED, XML_MODEL)
    assert prompt_tokens(xml_client, XML_MODEL, tool_choice=NAMED, extra_body=thinking_on) == \
        thinking_off + text_tokens(xml_client, XML_NAMED, XML_MODEL)


@pytest.mark.parametrize("kind", ["required", "named"])
def test_forced_xml_call(xml_client, kind):
    assert_forced_call(xml_client, XML_MODEL, CHOICES[kind], XML_CONTINUATION[kind])
