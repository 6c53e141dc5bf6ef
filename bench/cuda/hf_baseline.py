#!/usr/bin/env python3
"""Hugging Face transformers + PyTorch decode speed on a GPU: the baseline `peregrine bench -d
cuda` is compared with (issue #23), on the same weights (a Hugging Face folder, e.g. written by
`peregrine synth --format safetensors --dtype f16`).

For each batch size: greedy generation (`model.generate`, do_sample=False, KV cache on) of
--n-gen new tokens after a random --n-prompt-token prompt per sequence, one untimed warm-up,
then --reps timed runs (CUDA synchronized around each); prints generated tokens/s (all
sequences), the median of the runs, one line per batch size, and a JSON line at the end.
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model", help="Hugging Face model folder")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--n-prompt", type=int, default=16)
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    a = ap.parse_args()

    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=getattr(torch, a.dtype)).cuda().eval()
    vocab = model.config.vocab_size
    results = {}
    for b in a.batch:
        gen = torch.Generator(device="cpu").manual_seed(b)
        ids = torch.randint(0, vocab, (b, a.n_prompt), generator=gen).cuda()
        mask = torch.ones_like(ids)
        times = []
        for r in range(a.reps + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.inference_mode():
                out = model.generate(ids, attention_mask=mask, max_new_tokens=a.n_gen, min_new_tokens=a.n_gen,
                                     do_sample=False, pad_token_id=0)
            torch.cuda.synchronize()
            if r > 0:
                times.append(time.perf_counter() - t0)
            assert out.shape == (b, a.n_prompt + a.n_gen), out.shape
        tps = b * a.n_gen / statistics.median(times)
        results[b] = tps
        print(f"transformers {torch.__version__} {a.dtype} batch {b}: {tps:.1f} generated tokens/s "
              f"({a.n_prompt}-token prompts, {a.n_gen} new tokens, median of {a.reps})", flush=True)
    print(json.dumps({"hf_tokens_per_s": results}))


if __name__ == "__main__":
    main()
