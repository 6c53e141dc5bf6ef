#!/usr/bin/python3
"""Sanity checks of reference.py against real published data (run: tools/check_reference.py).

1. Encodes "Once upon a time" with llama2.c's tok512 BPE (expects [1, 403, 407, 261, 378]).
2. Greedy-decodes N tokens from stories260K.bin and .gguf with reference.forward (full
   forward each step) and checks the text is a prefix of greedy_once_upon_a_time.txt.
3. Reports max |logits(.bin) - logits(.gguf)| over the whole greedy sequence (must be <= 1e-5).
4. Writes one random model with make_test_models' writers as llama2.c, GGUF F32 and HF F32
   (tied and untied) and checks all three load to the same logits (<= 1e-5): the writers' Q/K
   permutation and the readers' un-permutation agree, and so do tensor names and shapes.
5. Checks Q8_0 / Q4_0 quantize -> dequantize error is within the block-format bound.
Exit code 0 when all checks pass.
"""
import argparse
import os
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_test_models as mtm  # noqa: E402
import reference  # noqa: E402

STORIES = mtm.STORIES
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


def cross_format_diff(tied):
    """Max |logits| difference between the same random weights saved as llama2.c, GGUF F32
    and HF F32 (all read back through reference.load_model)."""
    v = mtm.Variant("x", "hf", "f32", 2, 2, 172, tied, 1e4, 1e-5, seed=7)
    cfg = mtm.variant_config(v)
    w = mtm.random_weights(cfg, tied, v.seed)
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, "m.bin"), os.path.join(d, "m.gguf"), os.path.join(d, "hf")]
        mtm.write_llama2c(paths[0], cfg, w, tied)
        mtm.write_gguf(paths[1], 3, mtm.gguf_metadata(v, cfg, []), mtm.gguf_tensors(v, cfg, w))
        mtm.write_hf(paths[2], v, cfg, w)
        logits = [reference.compute_logits(p, mtm.RANDOM_TOKENS) for p in paths]
    return max(float(np.abs(a - logits[0]).max()) for a in logits[1:])


def quant_error(name, quantize, block_dtype, dequantize):
    """Max |x - dequant(quant(x))| / max|x| per block over random N(0, 1) data."""
    x = np.random.default_rng(0).standard_normal((256, reference.QK)).astype(np.float32)
    blocks = np.frombuffer(quantize(x), dtype=block_dtype)
    err = np.abs(dequantize(blocks).reshape(x.shape) - x).max(axis=1) / np.abs(x).max(axis=1)
    print(f"{name}: max per-block error / amax = {err.max():.4f}")
    return float(err.max())


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
    for tied in (False, True):
        diff = cross_format_diff(tied)
        ok &= diff <= 1e-5
        print(f"same weights as .bin / .gguf / HF (tied={tied}): max |diff| {diff:.3g}")
    # Bounds: Q8_0 rounds to d/2 = amax/254; Q4_0 steps by d = amax/8 (clamped top: d).
    ok &= quant_error("Q8_0", mtm.quantize_q8_0, reference.Q8_0_BLOCK,
                      reference.dequant_q8_0) <= 1 / 254 + 1e-3
    ok &= quant_error("Q4_0", mtm.quantize_q4_0, reference.Q4_0_BLOCK,
                      reference.dequant_q4_0) <= 1 / 8 + 1e-3
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
