#!/usr/bin/env python3
"""Loads a LoRA adapter folder with Hugging Face transformers + peft (`PeftModel.from_pretrained`)
on an HF base folder and compares the logits of a token list with a reference file (e.g.
`tools/reference.py --model BASE --lora ADAPTER --out FILE`, which the engine matches within 1e-4:
the LogitsParity test). Checks that the PEFT folders Peregrine writes (`lora synth`, `finetune`)
load in the library they are named after. Needs transformers and peft (not Debian packages; the
device tool's image has both); prints one line per adapter, exits 1 past --tolerance.

    peft_check.py --base HF_FOLDER --adapter PEFT_FOLDER --reference FILE --tokens 1,403,407 [--tolerance 1e-4]
"""
import argparse
import sys

import numpy as np
import peft
import torch
import transformers
from peft import PeftModel
from transformers import AutoModelForCausalLM


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="Hugging Face model folder")
    ap.add_argument("--adapter", required=True, help="PEFT LoRA folder")
    ap.add_argument("--reference", required=True, help="float32 LE logits [n_tokens, vocab]")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    a = ap.parse_args()
    tokens = torch.tensor([[int(t) for t in a.tokens.split(",")]])
    model = AutoModelForCausalLM.from_pretrained(a.base, dtype=torch.float32).eval()
    with torch.no_grad():
        plain = model(tokens).logits[0].numpy()
        got = PeftModel.from_pretrained(model, a.adapter).eval()(tokens).logits[0].numpy()
    want = np.fromfile(a.reference, "<f4").reshape(tokens.shape[1], -1)
    diff = float(np.abs(got - want).max())
    print(f"transformers {transformers.__version__}, peft {peft.__version__}: {a.adapter} on {a.base}: "
          f"max|dlogit| vs reference {diff:.2e} (the adapter moves the logits by {np.abs(got - plain).max():.2f})")
    return 0 if diff <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
