#!/usr/bin/python3
"""Issue #19's quality table: pruning method x target (x 4-bit) -> KL divergence against the
dense model, top-1 agreement and perplexity on held-out TinyStories text, for the two real
models.

Calibration text: ../shared/data/tinystories/tinystories_sample.txt.
Evaluation text: ../shared/data/tinystories/tinystories_valid_excerpt.txt (never used for
calibration).

Usage: bench/prune_results.py [--peregrine build/bin/peregrine] [--shared ../shared]
       [--out docs/pruning_results.md] [--threads 2]
Prints the markdown table and writes it to --out.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TARGETS = [["--sparsity", "0.5"], ["--pattern", "2:4"], ["--pattern", "4:8"]]
# (label, prune flags) in table order; each weight method at each target, with and without q4.
CONFIGS = [("dense", None)]
for method in ["magnitude", "wanda", "sparsegpt"]:
    for target in TARGETS:
        for quant in [[], ["--quantize", "q4"]]:
            label = f"{method} {target[1] if target[0] == '--pattern' else '50%'}{' + q4' if quant else ''}"
            CONFIGS.append((label, ["--method", method] + target + quant))
CONFIGS += [("layer-drop 1", ["--method", "layer-drop", "--drop", "1"]),
            ("layer-drop 2", ["--method", "layer-drop", "--drop", "2"]),
            ("width ffn 0.75 heads 0.75", ["--method", "width", "--ffn-keep", "0.75", "--heads-keep", "0.75"])]
MODELS = ["stories260K/stories260K.bin", "aidreams260K/aidreams260K.bin"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return r.stdout


def size_kb(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".safetensors")) // 1024
    return os.path.getsize(path) // 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peregrine", default="build/bin/peregrine")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--out", default="docs/pruning_results.md")
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
    calib = f"{a.shared}/data/tinystories/tinystories_sample.txt"
    text = f"{a.shared}/data/tinystories/tinystories_valid_excerpt.txt"
    rows = ["| model | method | size (KB) | KLD vs dense | top-1 | ppl TinyStories | dense ppl |", "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for rel in MODELS:
            model = f"{a.shared}/models/{rel}"
            name = os.path.basename(os.path.dirname(rel))
            for label, flags in CONFIGS:
                out = model
                if flags is not None:
                    out = os.path.join(tmp, f"{name}-{len(os.listdir(tmp))}")
                    run([a.peregrine, "prune", "-m", model, "-o", out, "--calib", calib, "-t", a.threads] + flags)
                k = json.loads(run([a.peregrine, "eval", "kld", "-m", out, "--ref", model, "-f", text, "--json", "-t", a.threads]))
                row = f"| {name} | {label} | {size_kb(out)} | {k['kld']:.4g} | {k['top1']:.3f} | {k['ppl']:.3f} | {k['ref_ppl']:.3f} |"
                print(row, flush=True)
                rows.append(row)
    doc = ["# Pruning results", "", "Produced by `bench/prune_results.py` (see its docstring for the texts). Pruned linears are",
           "stored dense (F32 zeros, or 4-bit symmetric codes with `+ q4`: groups of 32 columns, 64 for N:M), in a",
           "safetensors folder; the embedding, LM head and norms are the dense model's. 172-wide ffn_down rows keep",
           "their last 4 columns dense under 4:8. Speed of the 2:4 formats against their dense twins on the",
           "tinyllama-1.1b shape (`bench/sparse_vs_dense.sh`, same run): docs/performance.md, Pruning.", ""] + rows
    with open(a.out, "w") as f:
        f.write("\n".join(doc) + "\n")


if __name__ == "__main__":
    main()
