"""Structured outputs through the official `openai` client against `peregrine serve` with a real
instruct model (Qwen2.5-Coder-0.5B-Instruct): 20 JSON schemas of the kinds OpenAI's structured
outputs take (types, required and optional properties, enum, const, nested objects, arrays with
min / max items, tuples, anyOf / oneOf, type lists, $ref to $defs and recursion, string patterns,
formats and lengths, maps) each give a reply that parses and validates against its schema with
the `jsonschema` package, greedy and one streamed; bad schemas are a 400 naming the schema and
the server goes on serving.

Usage: .venv/bin/python structured_outputs_test.py PEREGRINE_BINARY MODEL.gguf
Exit 0 = pass, 77 = skipped (the model is not fetched and not required).
"""

import json
import sys

import jsonschema
import openai

from serve_process import expect_error, serve_real_model

MODEL_NAME = "qwen2.5-coder-0.5b-instruct"

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}

# (instruction, schema)
CASES = [
    ("Give a person named Ada, aged 36.", PERSON),
    ("Rate the movie Alien from 0 to 10 with a short comment.",
     {"type": "object", "properties": {"score": {"type": "number"}, "comment": {"type": "string", "maxLength": 60}},
      "required": ["score", "comment"]}),
    ("Is water wet? Answer as JSON.",
     {"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"]}),
    ("Pick the primary color of the sky.",
     {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}}, "required": ["color"]}),
    ("Report the API version.",
     {"type": "object", "properties": {"version": {"const": "v1"}, "ok": {"type": "boolean"}},
      "required": ["version", "ok"]}),
    ("Describe a book with its author.",
     {"type": "object", "properties": {
         "title": {"type": "string"},
         "author": {"type": "object", "properties": {"first": {"type": "string"}, "last": {"type": "string"}},
                    "required": ["first", "last"]}},
      "required": ["title", "author"]}),
    ("List three fruits.",
     {"type": "object", "properties": {"fruits": {"type": "array", "items": {"type": "string"}, "minItems": 3,
                                                  "maxItems": 3}}, "required": ["fruits"]}),
    ("List two people with their ages.",
     {"type": "object", "properties": {"people": {"type": "array", "items": PERSON, "minItems": 1, "maxItems": 2}},
      "required": ["people"]}),
    ("Give the coordinates of Paris as a [latitude, longitude] pair.",
     {"type": "object", "properties": {"point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]}},
      "required": ["point"]}),
    ("Give either a number or the word none.",
     {"type": "object", "properties": {"value": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["none"]}]}},
      "required": ["value"]}),
    ("Give a nickname, or null if there is none, for Robert.",
     {"type": "object", "properties": {"nickname": {"type": ["string", "null"]}}, "required": ["nickname"]}),
    ("Give a user and their manager.",
     {"type": "object", "$defs": {"user": PERSON},
      "properties": {"user": {"$ref": "#/$defs/user"}, "manager": {"$ref": "#/$defs/user"}},
      "required": ["user", "manager"]}),
    ("Describe a folder tree: a folder named src holding one empty folder named lib.",
     {"$ref": "#/$defs/node", "$defs": {"node": {
         "type": "object",
         "properties": {"name": {"type": "string", "maxLength": 20},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
         "required": ["name"]}}}),
    ("Give a US phone number like 555-0100.",
     {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^[0-9]{3}-[0-9]{4}$"}},
      "required": ["phone"]}),
    ("Give a product code: two capital letters, a dash and digits.",
     {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-\\d+$"}}, "required": ["code"]}),
    ("When was the Eiffel Tower opened? Give the date and the time of the opening.",
     {"type": "object", "properties": {"date": {"type": "string", "format": "date"},
                                       "at": {"type": "string", "format": "date-time"}},
      "required": ["date", "at"]}),
    ("Give a random identifier.",
     {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"]}),
    ("Count the letters of three words.",
     {"type": "object", "properties": {"counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
      "required": ["counts"]}),
    ("Answer with an empty object.", {"type": "object", "properties": {}, "additionalProperties": False}),
    ("Describe a pet; every field is optional.",
     {"type": "object", "properties": {"kind": {"oneOf": [{"const": "cat"}, {"const": "dog"}]},
                                       "name": {"type": "string", "minLength": 2, "maxLength": 12},
                                       "legs": {"type": "integer"}}}),
]


def ask(client, instruction, schema, stream=False):
    messages = [{"role": "system", "content": "You answer in JSON."}, {"role": "user", "content": instruction}]
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}
    if not stream:
        r = client.chat.completions.create(model=MODEL_NAME, messages=messages, response_format=fmt,
                                           temperature=0, max_tokens=400)
        return r.choices[0].message.content, r.choices[0].finish_reason
    text, finish = "", None
    for chunk in client.chat.completions.create(model=MODEL_NAME, messages=messages, response_format=fmt,
                                                temperature=0, max_tokens=400, stream=True):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    return text, finish


def check_schemas(client):
    assert len(CASES) == 20
    valid = 0
    for i, (instruction, schema) in enumerate(CASES):
        text, finish = ask(client, instruction, schema)
        assert finish == "stop", f"schema {i}: finish_reason {finish}: {text!r}"
        jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
        valid += 1
        print(f"  schema {i:2d}: {text!r}")
    streamed, finish = ask(client, CASES[7][0], CASES[7][1], stream=True)
    assert finish == "stop"
    jsonschema.validate(json.loads(streamed), CASES[7][1])
    print(f"{valid} of {len(CASES)} schemas: every reply valid (and one streamed)")


def check_bad_schemas(client):
    for schema, word in (({"type": "integer", "minimum": 0}, "minimum"), ({"$ref": "#/$defs/missing"}, "missing"),
                         ({"type": "strange"}, "strange"), ({"type": "string", "pattern": "(ab"}, "pattern")):
        err = expect_error(openai.BadRequestError, lambda: ask(client, "x", schema))
        assert err.status_code == 400 and err.param == "response_format.json_schema.schema", (err.status_code, err.param)
        assert word in err.message, err.message
    err = expect_error(openai.BadRequestError, lambda: client.completions.create(
        model=MODEL_NAME, prompt="x", extra_body={"grammar": "root ::= (\"a\""}))
    assert err.param == "grammar" and "line 1" in err.message, err.message
    text, _ = ask(client, CASES[0][0], CASES[0][1])  # still serving
    jsonschema.validate(json.loads(text), CASES[0][1])


def main():
    server = serve_real_model(sys.argv[1], sys.argv[2], MODEL_NAME)
    try:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=300)
        check_schemas(client)
        check_bad_schemas(client)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
