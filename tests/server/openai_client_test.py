"""Drives `peregrine serve` with the official `openai` Python package (PyPI, pinned in
scripts/requirements.txt, installed into .venv by scripts/setup.sh): models.list(), completion
and chat completion, embeddings, streaming (equal to the non-streaming greedy text; the raw stream ends in
`data: [DONE]`), errors (400 BadRequestError naming the param, 404 NotFoundError, 401
AuthenticationError), a grammar-constrained completion, n = 4 choices sharing one prefill, a
reasoning template's reply as reasoning_content, and concurrent clients (every one gets the same greedy text as the
sequential request). The server must exit 0 on SIGTERM.

Usage: .venv/bin/python openai_client_test.py PEREGRINE_BINARY   (exit 0 = pass)
"""

import concurrent.futures
import json
import sys
import tempfile
import urllib.request

import openai

from serve_process import Server, expect_error

MODEL = "stories260K"
API_KEY = "test-key"
PROMPT = "Once upon a time"


def check_completions(client, base_url):
    completion = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=32, temperature=0)
    assert completion.object == "text_completion"
    text = completion.choices[0].text
    assert text, "empty completion"
    assert completion.choices[0].finish_reason in ("stop", "length")
    usage = completion.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens

    streamed, finish = "", None
    for chunk in client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=32,
                                           temperature=0, stream=True):
        if chunk.choices:
            streamed += chunk.choices[0].text or ""
            finish = chunk.choices[0].finish_reason or finish
    assert streamed == text, f"streamed text differs from the non-streaming greedy text: {streamed!r} vs {text!r}"
    assert finish == completion.choices[0].finish_reason

    body = (b'{"model": "%s", "prompt": "%s", "max_tokens": 8, "temperature": 0, "stream": true}'
            % (MODEL.encode(), PROMPT.encode()))
    request = urllib.request.Request(f"{base_url}/completions", data=body, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=60) as raw:
        assert raw.headers["Content-Type"].split(";")[0] == "text/event-stream"
        assert raw.read().decode().endswith("data: [DONE]\n\n"), "the stream does not end with data: [DONE]"
    return text


def check_chat(client):
    messages = [{"role": "system", "content": "You tell short stories."},
                {"role": "user", "content": "Tell me about a cat."}]
    chat = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, temperature=0)
    assert chat.object == "chat.completion"
    assert chat.choices[0].message.role == "assistant"
    assert isinstance(chat.choices[0].message.content, str)
    assert chat.usage.prompt_tokens > 10

    streamed, role = "", None
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24,
                                                temperature=0, stream=True):
        if chunk.choices:
            role = role or chunk.choices[0].delta.role
            streamed += chunk.choices[0].delta.content or ""
    assert role == "assistant"
    assert streamed == chat.choices[0].message.content


def check_errors(client, base_url):
    err = expect_error(openai.BadRequestError, lambda: client.completions.create(
        model=MODEL, prompt=PROMPT, temperature=5))
    assert err.status_code == 400
    assert err.param == "temperature", err.param
    # One model and no LoRA adapters: any name is served by it (clients send their own defaults).
    other = client.completions.create(model="gpt-4", prompt=PROMPT, max_tokens=2)
    assert other.model == MODEL and other.usage.completion_tokens == 2, other
    wrong_key = openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0)
    expect_error(openai.AuthenticationError, wrong_key.models.list)


def check_structured(client):
    """A GBNF grammar (llama.cpp's field, through extra_body) constrains sampled text; a JSON
    schema with a keyword outside the supported subset is a 400 naming the schema."""
    for seed in range(3):
        done = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=16, temperature=1, seed=seed,
                                         extra_body={"grammar": 'root ::= " " ("yes" | "no") "."'})
        assert done.choices[0].text in (" yes.", " no."), done.choices[0].text
        assert done.choices[0].finish_reason == "stop"
    err = expect_error(openai.BadRequestError, lambda: client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": 1}}}))
    assert err.param == "response_format.json_schema.schema", err.param
    assert "minimum" in err.message, err.message


def prompt_tokens_computed(base_url):
    """peregrine_prompt_tokens_total from /metrics."""
    request = urllib.request.Request(base_url.removesuffix("/v1") + "/metrics",
                                     headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=60) as raw:
        for line in raw.read().decode().splitlines():
            if line.startswith("peregrine_prompt_tokens_total "):
                return float(line.split()[1])
    raise AssertionError("/metrics has no peregrine_prompt_tokens_total")


def check_parallel_samples(client, base_url):
    """n = 4 returns 4 choices, choice i sampled as a one-choice request with seed + i, the
    prompt computed once (each other choice computes only its last token: /metrics); streamed,
    every choice's chunks carry their index and one [DONE] ends the stream."""
    alone = [client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=1, seed=7 + i)
             for i in range(4)]
    before = prompt_tokens_computed(base_url)
    four = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=1, seed=7, n=4)
    computed = prompt_tokens_computed(base_url) - before
    assert sorted(c.index for c in four.choices) == [0, 1, 2, 3], [c.index for c in four.choices]
    for c in four.choices:
        assert c.text == alone[c.index].choices[0].text, (c.index, c.text, alone[c.index].choices[0].text)
    assert len({c.text for c in four.choices}) > 1, "every choice sampled the same text"
    prompt = four.usage.prompt_tokens
    assert computed == prompt + 3, f"{computed} prompt tokens computed for n = 4 of a {prompt}-token prompt"
    assert four.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)

    texts, finishes = ["", ""], [None, None]
    for chunk in client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=1, seed=7, n=2,
                                           stream=True):
        for c in chunk.choices:
            texts[c.index] += c.text or ""
            finishes[c.index] = c.finish_reason or finishes[c.index]
    assert texts == [alone[0].choices[0].text, alone[1].choices[0].text], texts
    assert None not in finishes, finishes


def check_embeddings(client, base_url):
    """/v1/embeddings: the client's default body (base64) and a "float" one agree; vectors of one
    width, unit norm, the same text the same vector, another text another; token-id inputs; an
    empty input is a 400 naming it."""
    texts = ["Once upon a time, there was a little cat.", "The boy ran to the park to play.",
             "Once upon a time, there was a little cat."]
    out = client.embeddings.create(model=MODEL, input=texts)
    assert [d.index for d in out.data] == [0, 1, 2]
    vectors = [d.embedding for d in out.data]
    assert len(vectors[0]) > 0 and all(len(v) == len(vectors[0]) for v in vectors)
    for v in vectors:
        assert abs(sum(x * x for x in v) - 1) < 1e-4, sum(x * x for x in v)
    assert max(abs(a - b) for a, b in zip(vectors[0], vectors[2])) < 1e-5
    assert max(abs(a - b) for a, b in zip(vectors[0], vectors[1])) > 1e-3
    assert out.usage.prompt_tokens > 10 and out.usage.total_tokens == out.usage.prompt_tokens

    body = json.dumps({"model": MODEL, "input": texts[1], "encoding_format": "float"}).encode()
    request = urllib.request.Request(f"{base_url}/embeddings", data=body, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=60) as raw:
        floats = json.loads(raw.read())["data"][0]["embedding"]
    assert max(abs(a - b) for a, b in zip(floats, vectors[1])) < 1e-5

    ids = client.embeddings.create(model=MODEL, input=[[1, 403, 407], [1, 403]])
    assert len(ids.data) == 2 and ids.usage.prompt_tokens == 5
    err = expect_error(openai.BadRequestError, lambda: client.embeddings.create(model=MODEL, input=""))
    assert err.param == "input", err.param


def check_reasoning(binary, template_dir):
    """A template whose generation prompt opens <think> (as DeepSeek-R1 distills' do): the reply
    arrives as reasoning_content (streamed as delta.reasoning_content, the same text), and with
    --reasoning-format none as content."""
    template = f"{template_dir}/think.jinja"
    with open(template, "w") as f:
        f.write("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|><think>\n")
    messages = [{"role": "user", "content": "Tell me about a cat."}]
    replies = {}
    for fmt in ("auto", "none"):
        server = Server([binary, "serve", "--ctx", "256", "--chat-template", template, "--reasoning-format", fmt])
        try:
            client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=120)
            chat = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, temperature=0)
            replies[fmt] = chat.choices[0].message
            if fmt == "auto":
                streamed = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                                   for c in client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24,
                                                                           temperature=0, stream=True) if c.choices)
                assert streamed == chat.choices[0].message.reasoning_content, (streamed, chat.choices[0].message)
        finally:
            server.stop()
    thought = replies["auto"].reasoning_content
    assert thought and replies["auto"].content == "", replies["auto"]
    assert replies["none"].content == thought and not (replies["none"].model_extra or {}).get("reasoning_content")


def check_concurrent_clients(base_url, expected_text, clients=6):
    """`clients` clients at once, each its own connection, streaming or not: all get the
    sequential greedy text (continuous batching must not change a greedy result)."""

    def one(i):
        client = openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0, timeout=120)
        if i % 2:
            return client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=32,
                                             temperature=0).choices[0].text
        return "".join(c.choices[0].text or "" for c in client.completions.create(
            model=MODEL, prompt=PROMPT, max_tokens=32, temperature=0, stream=True) if c.choices)

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        texts = list(pool.map(one, range(clients)))
    for i, text in enumerate(texts):
        assert text == expected_text, f"client {i} got {text!r}, expected {expected_text!r}"


def main():
    server = Server([sys.argv[1], "serve", "--ctx", "256", "--api-key", API_KEY])
    base_url = f"{server.url}/v1"
    try:
        client = openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0, timeout=120)
        assert [m.id for m in client.models.list().data] == [MODEL]
        text = check_completions(client, base_url)
        check_chat(client)
        check_errors(client, base_url)
        check_structured(client)
        check_parallel_samples(client, base_url)
        check_embeddings(client, base_url)
        check_concurrent_clients(base_url, text)
    finally:
        server.stop()
    with tempfile.TemporaryDirectory() as template_dir:
        check_reasoning(sys.argv[1], template_dir)
    print(f"openai {openai.__version__} client: all checks passed")


if __name__ == "__main__":
    main()
