"""Tool calling through the official `openai` client against `peregrine serve` with a real
instruct model (Qwen2.5-Coder-0.5B-Instruct, whose chat template renders `tools` with Hermes
<tool_call> instructions): a two-turn conversation (the model calls a function, gets its result
back as a "tool" message, answers) not streamed and streamed; tool_choice "required" and a named
function force a call whose arguments follow the function's schema; the same conversation through
the Responses API (function_call / function_call_output items); bad tool requests are a 400
naming the field and the server goes on serving.

Usage: .venv/bin/python tool_calling_test.py PEREGRINE_BINARY MODEL.gguf
Exit 0 = pass, 77 = skipped (the model is not fetched and not required).
"""

import json
import sys

import jsonschema
import openai

from serve_process import expect_error, serve_real_model

MODEL_NAME = "qwen2.5-coder-0.5b-instruct"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "PST"]}},
                   "required": ["zone"]}}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
RESULT = json.dumps({"temperature_c": 18, "sky": "sunny"})


def call_of(message_or_calls):
    calls = message_or_calls.tool_calls if hasattr(message_or_calls, "tool_calls") else message_or_calls
    assert calls and len(calls) == 1, calls
    call = calls[0]
    assert call.type == "function" and call.id.startswith("call_"), call
    return call


def second_turn(client, call, stream):
    """The conversation with the call and its result; returns the model's answer text."""
    messages = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": RESULT}]
    kwargs = dict(model=MODEL_NAME, messages=messages, tools=[WEATHER], tool_choice="none", temperature=0, max_tokens=60)
    if not stream:
        answer = client.chat.completions.create(**kwargs)
        assert answer.choices[0].finish_reason in ("stop", "length")
        assert not answer.choices[0].message.tool_calls
        return answer.choices[0].message.content
    return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kwargs) if c.choices)


def check_two_turns(client):
    first = client.chat.completions.create(model=MODEL_NAME, messages=QUESTION, tools=[WEATHER], temperature=0, max_tokens=100)
    assert first.choices[0].finish_reason == "tool_calls", first
    call = call_of(first.choices[0].message)
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"] == "Paris"
    answer = second_turn(client, call, stream=False)
    assert answer and ("18" in answer or "sunny" in answer.lower()), answer
    print(f"  not streamed: {call.function.name}({call.function.arguments}) -> {answer!r}")

    deltas, finish = {}, None
    for chunk in client.chat.completions.create(model=MODEL_NAME, messages=QUESTION, tools=[WEATHER], temperature=0,
                                                max_tokens=100, stream=True):
        if not chunk.choices:
            continue
        finish = chunk.choices[0].finish_reason or finish
        for d in chunk.choices[0].delta.tool_calls or []:
            entry = deltas.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = d.id or entry["id"]
            entry["name"] += d.function.name or ""
            entry["arguments"] += d.function.arguments or ""
    assert finish == "tool_calls" and list(deltas) == [0], (finish, deltas)
    assert deltas[0]["name"] == "get_weather" and json.loads(deltas[0]["arguments"]) == json.loads(call.function.arguments)
    streamed_call = openai.types.chat.ChatCompletionMessageToolCall(
        id=deltas[0]["id"], type="function", function={"name": deltas[0]["name"], "arguments": deltas[0]["arguments"]})
    streamed = second_turn(client, streamed_call, stream=True)
    assert streamed == answer, (streamed, answer)
    print(f"  streamed: the same call and answer")


def check_forced_calls(client):
    for choice, name in (("required", None), ({"type": "function", "function": {"name": "get_time"}}, "get_time")):
        r = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "What time is it in Berlin?"}],
                                           tools=[WEATHER, TIME], tool_choice=choice, parallel_tool_calls=False,
                                           temperature=0, max_tokens=100)
        assert r.choices[0].finish_reason == "tool_calls", r
        call = call_of(r.choices[0].message)
        tool = {"get_weather": WEATHER, "get_time": TIME}[call.function.name]
        assert name is None or call.function.name == name, call
        jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])
        print(f"  tool_choice {json.dumps(choice)}: {call.function.name}({call.function.arguments})")


def check_responses_api(client):
    """The same conversation through the Responses API: a function_call output item, its
    function_call_output sent back as input, the answer; streamed, the same call."""
    tool = {"type": "function", **WEATHER["function"]}
    first = client.responses.create(model=MODEL_NAME, input=QUESTION, tools=[tool], temperature=0, max_output_tokens=100)
    assert first.status == "completed" and first.id.startswith("resp_"), first
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather", first.output
    assert json.loads(calls[0].arguments)["city"] == "Paris"
    history = QUESTION + [{"type": "function_call", "call_id": calls[0].call_id, "name": calls[0].name, "arguments": calls[0].arguments},
                          {"type": "function_call_output", "call_id": calls[0].call_id, "output": RESULT}]
    answer = client.responses.create(model=MODEL_NAME, input=history, tools=[tool], tool_choice="none", temperature=0,
                                     max_output_tokens=60)
    assert answer.output_text and ("18" in answer.output_text or "sunny" in answer.output_text.lower()), answer.output_text
    events, final = [], None
    for e in client.responses.create(model=MODEL_NAME, input=QUESTION, tools=[tool], temperature=0, max_output_tokens=100,
                                     stream=True):
        events.append(e.type)
        final = e.response if e.type == "response.completed" else final
    assert events[:2] == ["response.created", "response.in_progress"] and "response.function_call_arguments.done" in events, events
    streamed = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, c.arguments) for c in streamed] == [(c.name, c.arguments) for c in calls], final.output
    print(f"  responses API: {calls[0].name}({calls[0].arguments}) -> {answer.output_text!r}; streamed the same call")


def check_bad_requests(client):
    cases = [
        (dict(messages=QUESTION, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
        (dict(messages=QUESTION, tools=[{"type": "function", "function": {"description": "no name"}}]), "tools[0]"),
        (dict(messages=QUESTION, tool_choice="required"), "tool_choice"),
        (dict(messages=QUESTION + [{"role": "tool", "content": "x"}], tools=[WEATHER]), "messages[1].tool_call_id"),
        (dict(messages=[{"role": "user", "content": "hi", "tool_calls": []}]), "messages[0].tool_calls"),
        (dict(messages=QUESTION, tools=[{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}}}], tool_choice="required"), "tools"),
    ]
    for kwargs, param in cases:
        err = expect_error(openai.BadRequestError, lambda: client.chat.completions.create(model=MODEL_NAME, max_tokens=8, **kwargs))
        assert err.status_code == 400 and err.param == param, (param, err.param, err.message)
    first = client.chat.completions.create(model=MODEL_NAME, messages=QUESTION, tools=[WEATHER], temperature=0, max_tokens=100)
    assert first.choices[0].finish_reason == "tool_calls"  # still serving


def main():
    server = serve_real_model(sys.argv[1], sys.argv[2], MODEL_NAME)
    try:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=300)
        check_two_turns(client)
        check_forced_calls(client)
        check_responses_api(client)
        check_bad_requests(client)
    finally:
        server.stop()
    print("tool calling: all checks passed")


if __name__ == "__main__":
    main()
