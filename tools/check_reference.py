#!/usr/bin/python3
"""Sanity checks of reference.py against real published data (run: tools/check_reference.py).

1. Encodes "Once upon a time" with llama2.c's tok512 BPE (expects [1, 403, 407, 261, 378]).
2. Greedy-decodes N tokens from stories260K.bin and .gguf with reference.forward (full
   forward each step) and checks the text is a prefix of greedy_once_upon_a_time.txt.
3. Reports max |logits(.bin) - logits(.gguf)| over the whole greedy sequence (must be <= 1e-5).
Exit code 0 when all checks pass.
"""
import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

STORIES = "/work/shared/models/stories260K"
PROMPT = "Once upon a time"
PROMPT_TOKENS = [1, 403, 407, 261, 378]


def read_tok512(path):
    """llama2.c tokenizer.bin -> (pieces: list[bytes], scores: list[float]).
    Format: int32 max_token_length, then per token: f32 score, int32 len, len bytes."""
    with open(path, "rb") as f:
        buf = f.read()
    pos, pieces, scores = 4, [], []
    while pos < len(buf):
        score, n = struct.unpack_from("<fi", buf, pos)
        pieces.append(buf[pos + 8:pos + 8 + n])
        scores.append(score)
        pos += 8 + n
    return pieces, scores


def encode(text, pieces, scores):
    """llama2.c encode(bos=1): dummy-prefix space, per-char lookup (byte fallback +3),
    then repeatedly merge the adjacent pair whose merged piece has the highest score."""
    index = {p: i for i, p in enumerate(pieces)}
    ids = []
    for ch in " " + text:
        b = ch.encode("utf-8")
        ids += [index[b]] if b in index else [x + 3 for x in b]
    while True:
        best = max(((scores[index[pieces[a] + pieces[b]]], i)
                    for i, (a, b) in enumerate(zip(ids, ids[1:]))
                    if pieces[a] + pieces[b] in index), default=None)
        if best is None:
            return [1] + ids
        i = best[1]
        ids[i:i + 2] = [index[pieces[ids[i]] + pieces[ids[i + 1]]]]


def decode(ids, pieces):
    """llama2.c decode of a token list (BOS dropped, leading space after BOS stripped,
    <0xXX> pieces as raw bytes) -> str."""
    out, prev = b"", None
    for t in ids:
        piece = pieces[t]
        if prev == 1 and piece.startswith(b" "):
            piece = piece[1:]
        if piece.startswith(b"<0x") and piece.endswith(b">") and len(piece) == 6:
            piece = bytes([int(piece[3:5], 16)])
        if t != 1:
            out += piece
        prev = t
    return out.decode("utf-8", errors="replace")


def greedy(model_path, prompt, steps):
    """Greedy continuation: returns (token list, float32 logits [len-1, vocab] of last pass)."""
    cfg, weights = reference.load_model(model_path)
    tokens = list(prompt)
    for _ in range(steps):
        logits = reference.forward(cfg, weights, tokens)
        tokens.append(int(logits[-1].argmax()))
    return tokens, reference.forward(cfg, weights, tokens[:-1])


def main():
    """Run the checks, print figures, return exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60, help="greedy tokens to generate")
    args = ap.parse_args()
    pieces, scores = read_tok512(os.path.join(STORIES, "tok512.bin"))
    with open(os.path.join(STORIES, "greedy_once_upon_a_time.txt")) as f:
        expected = f.read()
    ok = encode(PROMPT, pieces, scores) == PROMPT_TOKENS
    print(f"encode({PROMPT!r}) == {PROMPT_TOKENS}: {ok}")
    logits = {}
    for ext in ("bin", "gguf"):
        tokens, logits[ext] = greedy(os.path.join(STORIES, f"stories260K.{ext}"),
                                     PROMPT_TOKENS, args.steps)
        text = decode(tokens, pieces)
        match = expected.startswith(text)
        ok &= match
        print(f"{ext}: {args.steps} greedy tokens, {len(text)} chars, prefix of expected: "
              f"{match}\n  {text!r}")
    diff = float(np.abs(logits["bin"] - logits["gguf"]).max())
    ok &= diff <= 1e-5
    print(f"max |logits(bin) - logits(gguf)| over {logits['bin'].shape}: {diff:.3g}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
