"""Chat completions through the official openai SDK: content, usage, streaming, sampling, logprobs, stop."""
import math

from conftest import MODEL


def test_models_lists_the_served_model(client):
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL


def test_greedy_chat_matches_transformers(client, golden):
    # golden.json: HF transformers rendered these messages to 60 tokens and decoded 24 greedy tokens.
    response = client.chat.completions.create(model=MODEL, messages=golden["messages"], temperature=0,
                                              max_tokens=len(golden["greedy_tokens"]))
    choice = response.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == golden["continuation_text"]
    assert choice.finish_reason == "length"
    assert response.usage.prompt_tokens == len(golden["prompt"])
    assert response.usage.completion_tokens == len(golden["greedy_tokens"])
    assert response.usage.total_tokens == len(golden["prompt"]) + len(golden["greedy_tokens"])
    assert response.object == "chat.completion" and response.id.startswith("chatcmpl-")


def test_content_parts_render_like_a_string(client):
    as_string = client.chat.completions.create(
        model=MODEL, temperature=0, max_tokens=6, messages=[{"role": "user", "content": "Hello\nthere"}])
    as_parts = client.chat.completions.create(
        model=MODEL, temperature=0, max_tokens=6,
        messages=[{"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}])
    assert as_parts.usage.prompt_tokens == as_string.usage.prompt_tokens
    assert as_parts.choices[0].message.content == as_string.choices[0].message.content


def collect_stream(stream):
    content, finish, usage, roles = "", None, None, []
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.role:
                roles.append(choice.delta.role)
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return content, finish, usage, roles


def test_streaming_equals_non_streaming_for_the_same_seed(client):
    args = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a story."}], temperature=0.9,
                top_p=0.95, seed=1234, max_tokens=40, extra_body={"top_k": 50, "min_p": 0.01})
    whole = client.chat.completions.create(**args)
    content, finish, usage, roles = collect_stream(
        client.chat.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    assert content == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert roles == ["assistant"]
    assert usage.prompt_tokens == whole.usage.prompt_tokens
    assert usage.completion_tokens == whole.usage.completion_tokens


def test_stream_without_include_usage_has_no_usage_chunk(client):
    chunks = list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=3, temperature=0, stream=True))
    assert all(chunk.usage is None for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_seeds_decide_the_sample(client):
    args = dict(model=MODEL, messages=[{"role": "user", "content": "Pick words."}], temperature=1.5, max_tokens=24)
    a = client.chat.completions.create(**args, seed=1).choices[0].message.content
    b = client.chat.completions.create(**args, seed=1).choices[0].message.content
    c = client.chat.completions.create(**args, seed=2).choices[0].message.content
    assert a == b
    assert a != c


def test_penalties_are_applied(client):
    args = dict(model=MODEL, messages=[{"role": "user", "content": "Repeat yourself."}], temperature=0, max_tokens=64)
    plain = client.chat.completions.create(**args, logprobs=True)
    penalised = client.chat.completions.create(**args, logprobs=True, frequency_penalty=2.0, presence_penalty=2.0)
    plain_tokens = [t.token for t in plain.choices[0].logprobs.content]
    penalised_tokens = [t.token for t in penalised.choices[0].logprobs.content]
    # The random model repeats tokens greedily; penalties of 2 must steer away from some repetition.
    assert len(set(plain_tokens)) < len(plain_tokens)
    assert penalised_tokens != plain_tokens


def test_logprobs_describe_each_token(client):
    response = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                              temperature=0, max_tokens=10, logprobs=True, top_logprobs=3)
    entries = response.choices[0].logprobs.content
    assert len(entries) == response.usage.completion_tokens == 10
    for entry in entries:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
        tops = [t.logprob for t in entry.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        # Greedy: the chosen token is the most likely one.
        assert math.isclose(entry.logprob, tops[0], rel_tol=1e-6)
        assert bytes(entry.bytes) == bytes(entry.top_logprobs[0].bytes)


def test_streamed_logprobs_cover_every_token(client):
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                            temperature=0, max_tokens=12, logprobs=True, stream=True)
    entries = [e for chunk in stream for c in chunk.choices if c.logprobs for e in (c.logprobs.content or [])]
    assert len(entries) == 12


def test_stop_string_cuts_the_answer(client):
    response = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=100, stop=["STOP", "never"],
        extra_body={"imp_forced_output": "hello world STOP and more"})
    assert response.choices[0].message.content == "hello world "
    assert response.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=100, stop="STOP", stream=True,
        extra_body={"imp_forced_output": "hello world STOP and more"})
    content, finish, _, _ = collect_stream(stream)
    assert (content, finish) == ("hello world ", "stop")


def test_eos_ends_with_stop(client):
    response = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=50,
                                              extra_body={"imp_forced_output": "Short answer."})
    assert response.choices[0].message.content == "Short answer."
    assert response.choices[0].finish_reason == "stop"


def test_max_completion_tokens_is_honoured(client):
    response = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                              temperature=0, max_completion_tokens=5)
    assert response.usage.completion_tokens == 5
    assert response.choices[0].finish_reason == "length"


def test_enable_thinking_false_closes_the_thought_in_the_prompt(client):
    messages = [{"role": "user", "content": "hi"}]
    on = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1, temperature=0)
    off = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1, temperature=0,
                                         extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    # Qwen3's template appends "<think>\n\n</think>\n\n" when thinking is off.
    assert off.usage.prompt_tokens > on.usage.prompt_tokens
