"""/v1/completions: plain text in, text out (no template, no reasoning or tool parsing)."""
from conftest import MODEL


def test_completion_text_and_usage(client):
    response = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=12, temperature=0)
    choice = response.choices[0]
    assert response.object == "text_completion"
    assert choice.finish_reason == "length"
    assert response.usage.completion_tokens == 12
    assert response.usage.prompt_tokens > 0
    assert len(choice.text) > 0


def test_token_prompt_equals_text_prompt(client):
    # `imp tokenize` of "Once upon a time" with chat_tiny's tokenizer.
    ids = [46, 77, 346, 220, 454, 263, 264, 259, 318, 68]
    text = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=8, temperature=0)
    tokens = client.completions.create(model=MODEL, prompt=ids, max_tokens=8, temperature=0)
    assert text.usage.prompt_tokens == tokens.usage.prompt_tokens == len(ids)
    assert tokens.choices[0].text == text.choices[0].text


def test_streamed_completion_equals_whole(client):
    args = dict(model=MODEL, prompt="The sea", max_tokens=20, temperature=0.7, seed=7)
    whole = client.completions.create(**args)
    streamed = "".join(c.choices[0].text for c in client.completions.create(**args, stream=True) if c.choices)
    assert streamed == whole.choices[0].text


def test_completion_logprobs(client):
    response = client.completions.create(model=MODEL, prompt="hello", max_tokens=5, temperature=0, logprobs=2)
    logprobs = response.choices[0].logprobs
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs) == 5
    assert logprobs.text_offset[0] == 0
    assert all(lp <= 0 for lp in logprobs.token_logprobs)
    assert all(1 <= len(top) <= 2 for top in logprobs.top_logprobs)


def test_think_tags_are_plain_text_in_completions(client):
    response = client.completions.create(model=MODEL, prompt="x", max_tokens=100,
                                         extra_body={"imp_forced_output": "<think>a</think>b"})
    assert response.choices[0].text == "<think>a</think>b"
    assert response.choices[0].finish_reason == "stop"
