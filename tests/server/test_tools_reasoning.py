"""Tool calls and reasoning end to end. chat_tiny's greedy text is neither, so these use the test-only
request field imp_forced_output: the server generates exactly that text's tokens through the engine, the
detokenizer and the output parser, the same path as sampled tokens."""
import json

from conftest import MODEL, WEATHER_TOOL, collect_stream

CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]


def test_tool_call_round_trip(client):
    response = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=[WEATHER_TOOL], max_tokens=400,
                                              extra_body={"imp_forced_output": CALL_TEXT})
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 3}

    # The client answers the call; the server renders the assistant call and the tool result.
    follow_up = MESSAGES + [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 21})},
    ]
    answer = client.chat.completions.create(model=MODEL, messages=follow_up, tools=[WEATHER_TOOL], max_tokens=50,
                                            extra_body={"imp_forced_output": "It is 21 C in Paris."})
    assert answer.choices[0].message.content == "It is 21 C in Paris."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage.prompt_tokens > response.usage.prompt_tokens


def test_streamed_tool_call_deltas(client):
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=[WEATHER_TOOL], max_tokens=400,
                                            stream=True, extra_body={"imp_forced_output": "Let me check. " + CALL_TEXT})
    content, _, calls, finish = collect_stream(stream)
    assert finish == "tool_calls"
    assert content == "Let me check. "
    assert list(calls) == [0]
    assert calls[0]["id"] and calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris", "days": 3}


def test_tool_choice_none_leaves_the_text_alone(client):
    response = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=[WEATHER_TOOL], tool_choice="none",
                                              max_tokens=400, extra_body={"imp_forced_output": CALL_TEXT})
    assert response.choices[0].message.tool_calls is None
    assert response.choices[0].message.content == CALL_TEXT
    assert response.choices[0].finish_reason == "stop"


def test_reasoning_is_split_from_content(client):
    text = "<think>\nThe user greets me.\n</think>\n\nHello!"
    response = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=200,
                                              extra_body={"imp_forced_output": text})
    message = response.choices[0].message
    assert message.content == "Hello!"
    assert message.reasoning_content == "\nThe user greets me.\n"

    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=200, stream=True,
                                            extra_body={"imp_forced_output": text})
    content, reasoning, _, _ = collect_stream(stream)
    assert (reasoning, content) == (message.reasoning_content, message.content)


def test_reasoning_then_tool_call(client):
    text = "<think>\nI need the weather.\n</think>\n\n" + CALL_TEXT
    response = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=[WEATHER_TOOL], max_tokens=400,
                                              extra_body={"imp_forced_output": text})
    message = response.choices[0].message
    assert message.reasoning_content == "\nI need the weather.\n"
    assert message.tool_calls[0].function.name == "get_weather"
    assert response.choices[0].finish_reason == "tool_calls"
