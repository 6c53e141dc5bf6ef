#!/usr/bin/python3
"""Issue #6's results table: method x bits x group -> model size, perplexity on TinyStories and
WikiText-2, KL divergence against the F32 model, and decode tokens/s of the same format on the
tinyllama-1.1b synth shape (random weights: speed only).

Calibration text: ../shared/data/tinystories/tinystories_sample.txt.
Evaluation text: ../shared/data/tinystories/tinystories_valid_excerpt.txt and the first
--wiki-tokens tokens of ../shared/data/wikitext-2/wiki.test.raw (never used for calibration).

Usage: bench/quant_results.py [--peregrine build/bin/peregrine] [--shared ../shared]
       [--out docs/quantization_results.md] [--no-speed] [--threads 2]
Prints the markdown table and writes it to --out.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# (label, quantize flags, output kind): kind "dir" writes a safetensors folder, "gguf" a file.
CONFIGS = [
    ("none (F32 model; F16 for the tinyllama speed)", None, None),
    ("rtn W8A16 per-channel", ["--method", "rtn", "--bits", "8", "--group", "-1"], "dir"),
    ("rtn Q8_0 (GGUF)", ["--method", "rtn", "--bits", "8", "--group", "32"], "gguf"),
    ("smoothquant W8A8", ["--method", "smoothquant"], "dir"),
    ("smoothquant W8A8 + hadamard", ["--method", "smoothquant", "--rotate", "hadamard"], "dir"),
    ("gptq W8A8 + hadamard", ["--method", "gptq", "--bits", "8", "--group", "-1", "--act-bits", "8",
                              "--rotate", "hadamard"], "dir"),
    ("smoothquant + gptq W8A8 + hadamard", ["--method", "gptq", "--bits", "8", "--group", "-1", "--act-bits", "8",
                                            "--smooth", "--rotate", "hadamard"], "dir"),
    ("llm-int8 W8A8 + outliers", ["--method", "llm-int8"], "dir"),
    ("fp8 e4m3 per-channel", ["--method", "fp8", "--fp8-format", "e4m3"], "dir"),
    ("fp8 e5m2 per-channel", ["--method", "fp8", "--fp8-format", "e5m2"], "dir"),
    ("rtn Q4_0 (GGUF)", ["--method", "rtn", "--bits", "4", "--group", "32"], "gguf"),
    ("rtn 4-bit per-tensor", ["--method", "rtn", "--bits", "4", "--group", "0"], "dir"),
    ("rtn 4-bit per-channel", ["--method", "rtn", "--bits", "4", "--group", "-1"], "dir"),
    ("rtn 4-bit g128", ["--method", "rtn", "--bits", "4", "--group", "128"], "dir"),
    ("gptq 4-bit g128", ["--method", "gptq", "--bits", "4", "--group", "128"], "dir"),
    ("rtn 4-bit g32", ["--method", "rtn", "--bits", "4", "--group", "32"], "dir"),
    ("rtn 4-bit g32 asym", ["--method", "rtn", "--bits", "4", "--group", "32", "--asym"], "dir"),
    ("gptq 4-bit g32", ["--method", "gptq", "--bits", "4", "--group", "32"], "dir"),
    ("gptq 4-bit g32 act-order", ["--method", "gptq", "--bits", "4", "--group", "32", "--act-order"], "dir"),
    ("awq 4-bit g32 asym", ["--method", "awq", "--bits", "4", "--group", "32", "--asym"], "dir"),
    ("rtn 4-bit g32 W4A8", ["--method", "rtn", "--bits", "4", "--group", "32", "--act-bits", "8"], "dir"),
    ("rtn 4-bit g32 W4A8 + hadamard", ["--method", "rtn", "--bits", "4", "--group", "32", "--act-bits", "8",
                                       "--rotate", "hadamard"], "dir"),
    ("rtn 3-bit g32", ["--method", "rtn", "--bits", "3", "--group", "32"], "dir"),
    ("gptq 3-bit g32", ["--method", "gptq", "--bits", "3", "--group", "32"], "dir"),
    ("awq 3-bit g32", ["--method", "awq", "--bits", "3", "--group", "32"], "dir"),
    ("rtn 2-bit g32", ["--method", "rtn", "--bits", "2", "--group", "32"], "dir"),
    ("gptq 2-bit g32", ["--method", "gptq", "--bits", "2", "--group", "32"], "dir"),
]

MODELS = ["stories260K/stories260K.bin", "aidreams260K/aidreams260K.bin"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return r.stdout


def size_bytes(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".safetensors"))
    return os.path.getsize(path)


def quantize(a, model, flags, kind, tmp, name, calib):
    out = os.path.join(tmp, name + (".gguf" if kind == "gguf" else ""))
    cmd = [a.peregrine, "quantize", "-m", model, "-o", out, "-t", str(a.threads)] + flags
    if calib and any(m in flags for m in ("gptq", "awq", "smoothquant")):
        cmd += ["--calib", calib]
    run(cmd)
    return out


def quality(a, model, ref, ts_text, wiki_text):
    ppl_ts = json.loads(run([a.peregrine, "eval", "ppl", "-m", model, "-f", ts_text, "--json", "-t", str(a.threads)]))
    ppl_wiki = json.loads(run([a.peregrine, "eval", "ppl", "-m", model, "-f", wiki_text, "--json",
                               "--max-tokens", str(a.wiki_tokens), "-t", str(a.threads)]))
    kld = json.loads(run([a.peregrine, "eval", "kld", "-m", model, "--ref", ref, "-f", ts_text, "--json",
                          "-t", str(a.threads)]))
    return ppl_ts["ppl"], ppl_wiki["ppl"], kld["kld"], kld["top1"]


def decode_speed(a, flags, kind, tmp, name, synth):
    """Decode tokens/s and weight bytes of the format `flags` produce, on the tinyllama synth model."""
    model = synth if flags is None else quantize(a, synth, flags_for_speed(flags), kind, tmp, "tl-" + name, None)
    size = size_bytes(model)
    out = json.loads(run([a.peregrine, "bench", "-m", model, "-p", "16", "-n", str(a.speed_tokens), "-r", "2",
                          "-t", str(a.threads), "--json"]))
    row = out[0] if isinstance(out, list) else out
    if flags is not None:
        subprocess.run(["rm", "-rf", model], check=True)
    return row["tg_tps"], size


def flags_for_speed(flags):
    """Speed depends on the stored format only: calibrated methods are timed through the RTN
    encoding of the same format (GPTQ/AWQ/SmoothQuant produce the same tensor layout)."""
    f = list(flags)
    i = f.index("--method")
    if f[i + 1] in ("gptq", "awq"):
        f[i + 1] = "rtn"
        f = [x for x in f if x not in ("--act-order", "--smooth")]
    if f[i + 1] == "smoothquant":
        f = ["--method", "rtn", "--bits", "8", "--group", "-1", "--act-bits", "8"] + f[i + 2:]
    return f


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--peregrine", default=os.path.join(here, "..", "build", "bin", "peregrine"))
    p.add_argument("--shared", default=os.environ.get("PEREGRINE_SHARED_DIR", os.path.join(here, "..", "..", "shared")))
    p.add_argument("--out", default=os.path.join(here, "..", "docs", "quantization_results.md"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--wiki-tokens", type=int, default=20000)
    p.add_argument("--speed-tokens", type=int, default=32)
    p.add_argument("--no-speed", action="store_true", help="skip the tinyllama-1.1b decode column")
    a = p.parse_args()
    calib = os.path.join(a.shared, "data/tinystories/tinystories_sample.txt")
    ts_text = os.path.join(a.shared, "data/tinystories/tinystories_valid_excerpt.txt")
    wiki_text = os.path.join(a.shared, "data/wikitext-2/wiki.test.raw")
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        speed = {}
        if not a.no_speed:
            synth = os.path.join(tmp, "tinyllama-f16.gguf")
            run([a.peregrine, "synth", "--shape", "tinyllama-1.1b", "--dtype", "f16", "-o", synth, "-t", str(a.threads)])
            by_format = {}
            for i, (label, flags, kind) in enumerate(CONFIGS):
                key = (tuple(flags_for_speed(flags)) if flags else None, kind)
                t0 = time.time()
                if key not in by_format:
                    by_format[key] = decode_speed(a, flags, kind, tmp, str(i), synth)
                speed[label] = by_format[key]
                print(f"speed {label}: {speed[label][0]:.2f} tok/s ({time.time() - t0:.0f} s)", file=sys.stderr)
        header = ("| model | method | size (KB) | ppl TinyStories | ppl WikiText-2 | KLD vs F32 | top-1 | "
                  "tinyllama-1.1b decode (tok/s) | tinyllama size (MB) |")
        lines += [header, "|" + "---|" * 9]
        for rel in MODELS:
            ref = os.path.join(a.shared, "models", rel)
            for i, (label, flags, kind) in enumerate(CONFIGS):
                model = ref if flags is None else quantize(a, ref, flags, kind, tmp, f"{i}-{os.path.basename(rel)}", calib)
                ppl_ts, ppl_wiki, kld, top1 = quality(a, model, ref, ts_text, wiki_text)
                tps, tl_size = speed.get(label, (float("nan"), None))
                size_kb = size_bytes(model) / 1024
                lines.append(f"| {rel.split('/')[0]} | {label} | {size_kb:.0f} | {ppl_ts:.3f} | {ppl_wiki:.2f} | "
                             f"{kld:.3g} | {top1:.3f} | {tps:.2f} | {tl_size / 1e6 if tl_size else float('nan'):.0f} |")
                print(lines[-1], file=sys.stderr)
    table = "\n".join(lines) + "\n"
    print(table)
    with open(a.out, "w") as f:
        f.write("# Quantization results\n\nProduced by `bench/quant_results.py` (see its docstring for the texts).\n\n")
        f.write(table)


if __name__ == "__main__":
    main()
