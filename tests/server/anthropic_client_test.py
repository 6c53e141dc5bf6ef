"""Anthropic's Messages API through the official `anthropic` client against `peregrine serve` with
real instruct models: Qwen2.5-Coder-0.5B-Instruct (its template renders tools as Hermes blocks)
in a two-turn tool conversation (tool_use, then a tool_result answered in text), not streamed
and streamed, with count_tokens agreeing with the message's usage and the client's x-api-key
checked; a reply following output_config.format's JSON schema; Gemma 3 270M, whose template renders no tools, forced to call one (tool_choice "any":
the generic format) with arguments that follow the tool's schema; bad requests in Anthropic's
error shape.

Usage: .venv/bin/python anthropic_client_test.py PEREGRINE_BINARY QWEN.gguf GEMMA.gguf
Exit 0 = pass, 77 = skipped (a model is not fetched and not required).
"""

import json
import sys

import anthropic
import jsonschema

from serve_process import Server, expect_error, require_real_model, serve_real_model

KEY = "local-secret"
WEATHER = {"name": "get_weather", "description": "Get the current weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
GREEDY = {"temperature": 0}  # the SDK no longer has the parameter; the server still reads it
RESULT = '{"temperature_c": 18, "sky": "sunny"}'


def tool_use_of(message):
    assert message.stop_reason == "tool_use", message
    uses = [b for b in message.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather", message.content
    return uses[0]


def second_turn(client, use):
    messages = QUESTION + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": RESULT}]}]
    answer = client.messages.create(model="qwen", max_tokens=60, extra_body=GREEDY, tools=[WEATHER],
                                    tool_choice={"type": "none"}, messages=messages)
    assert answer.stop_reason in ("end_turn", "max_tokens"), answer
    assert [b.type for b in answer.content] == ["text"], answer.content
    text = answer.content[0].text
    assert "18" in text or "sunny" in text.lower(), text
    return text


def check_two_turns(client):
    first = client.messages.create(model="qwen", max_tokens=100, extra_body=GREEDY, tools=[WEATHER], messages=QUESTION)
    use = tool_use_of(first)
    assert use.input["city"] == "Paris", use.input
    counted = client.messages.count_tokens(model="qwen", tools=[WEATHER], messages=QUESTION)
    assert counted.input_tokens == first.usage.input_tokens > 0, (counted, first.usage)
    print(f"  not streamed: {use.name}({use.input}) -> {second_turn(client, use)!r}; {counted.input_tokens} input tokens")

    with client.messages.stream(model="qwen", max_tokens=100, extra_body=GREEDY, tools=[WEATHER], messages=QUESTION) as stream:
        events = [e.type for e in stream]
        streamed = stream.get_final_message()
    assert events[0] == "message_start" and "content_block_start" in events, events
    streamed_use = tool_use_of(streamed)
    assert streamed_use.input == use.input and streamed.usage.output_tokens == first.usage.output_tokens, (streamed, first)
    print(f"  streamed: the same call ({len(events)} events)")


def check_output_format(client):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    reply = client.messages.create(model="qwen", max_tokens=60, extra_body=GREEDY,
                                   output_config={"format": {"type": "json_schema", "schema": schema}},
                                   messages=[{"role": "user", "content": "Name a large city and its population as JSON."}])
    data = json.loads(reply.content[0].text)
    jsonschema.validate(data, schema)
    print(f"  output_config.format: {data}")


def check_errors(client, url):
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    err = expect_error(anthropic.BadRequestError, lambda: client.messages.create(
        model="qwen", max_tokens=8, messages=[{"role": "user", "content": [image, {"type": "text", "text": "What is this?"}]}]))
    assert err.status_code == 400 and err.body["type"] == "error", err.body
    assert err.body["error"]["type"] == "invalid_request_error" and "image input is not supported" in err.body["error"]["message"]
    err = expect_error(anthropic.BadRequestError, lambda: client.messages.create(
        model="qwen", max_tokens=8, messages=[{"role": "user", "content": [{"type": "server_tool_use", "id": "x"}]}]))
    assert "messages[0].content[0].type" in err.body["error"]["message"], err.body
    wrong = anthropic.Anthropic(base_url=url, api_key="wrong", max_retries=0)
    err = expect_error(anthropic.AuthenticationError, lambda: wrong.messages.create(model="qwen", max_tokens=8, messages=QUESTION))
    assert err.body["error"]["type"] == "authentication_error", err.body
    assert client.messages.create(model="qwen", max_tokens=4, messages=QUESTION).usage.output_tokens > 0  # still serving


def check_generic_forced_call(binary, gemma):
    server = Server([binary, "serve", "-m", gemma, "--ctx", "2048"])
    try:
        client = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0, timeout=300)
        forced = client.messages.create(model="gemma", max_tokens=60, extra_body=GREEDY, tools=[WEATHER],
                                        tool_choice={"type": "any"}, messages=QUESTION)
        use = tool_use_of(forced)
        jsonschema.validate(use.input, WEATHER["input_schema"])
        print(f"  Gemma 3 (generic tools), tool_choice any: {use.name}({use.input})")
    finally:
        server.stop()


def main():
    binary, qwen, gemma = sys.argv[1:4]
    require_real_model(gemma, "gemma3-270m")
    server = serve_real_model(binary, qwen, "qwen2.5-coder-0.5b-instruct", ["--api-key", KEY])
    try:
        client = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0, timeout=300)
        check_two_turns(client)
        check_output_format(client)
        check_errors(client, server.url)
    finally:
        server.stop()
    check_generic_forced_call(binary, gemma)
    print("anthropic client: all checks passed")


if __name__ == "__main__":
    main()
