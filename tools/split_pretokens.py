#!/usr/bin/env python3
"""Splits texts with a pre-tokenizer regex the way Hugging Face tokenizers' `Split` pre-tokenizer
does with behavior "Isolated" (every match is a piece, and so is every unmatched gap between
matches), using the `regex` module (Debian python3-regex), whose \\p{..} classes and \\s follow
Unicode as the Rust (onig / fancy-regex) engines behind tokenizers and tiktoken do.

Reads JSON on stdin: {"pattern": regex, "texts": [string, ...]}. Writes JSON on stdout: one list
of pieces per text. Exit status 3 when the `regex` module is not installed.
"""
import json
import sys

try:
    import regex
except ImportError:
    print("the python3 regex module is not installed", file=sys.stderr)
    sys.exit(3)


def split_isolated(pattern, text):
    pieces, end = [], 0
    for m in pattern.finditer(text):
        if m.start() > end:
            pieces.append(text[end:m.start()])
        if m.end() > m.start():
            pieces.append(m.group())
        end = m.end()
    if end < len(text):
        pieces.append(text[end:])
    return pieces


def main():
    request = json.load(sys.stdin)
    pattern = regex.compile(request["pattern"])
    json.dump([split_isolated(pattern, t) for t in request["texts"]], sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
