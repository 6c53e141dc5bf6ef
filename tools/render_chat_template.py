#!/usr/bin/env python3
"""Renders chat templates with jinja2 exactly as transformers' apply_chat_template does.

Reads JSON on stdin: one case {template, messages, add_generation_prompt, bos_token, eos_token}
or a list of them. Writes JSON on stdout: per case {"text": rendering} or {"error": message}
(a list for a list). The environment is transformers' (chat_template_utils._compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols), the tojson
filter json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys),
the raise_exception / strftime_now globals and the {% generation %} block (transformers'
AssistantTracker: its body rendered as it is); render gets tools=None and documents=None.
Exit status 3 when jinja2 is not installed.
"""
import json
import sys
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("jinja2 is not installed", file=sys.stderr)
    sys.exit(3)


class Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers marks the assistant's tokens with it
    (for return_assistant_tokens_mask); the text is the body's."""

    tags = {"generation"}

    def parse(self, parser):
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, case):
    try:
        template = env.from_string(case["template"])
        text = template.render(
            messages=case["messages"],
            tools=None,
            documents=None,
            add_generation_prompt=case.get("add_generation_prompt", False),
            bos_token=case.get("bos_token", ""),
            eos_token=case.get("eos_token", ""),
        )
        return {"text": text}
    except Exception as e:  # noqa: BLE001 - template errors and the Python errors they raise
        return {"error": str(e)}


def main():
    request = json.load(sys.stdin)
    env = environment()
    if isinstance(request, list):
        result = [render(env, case) for case in request]
    else:
        result = render(env, request)
    json.dump(result, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
