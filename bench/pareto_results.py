#!/usr/bin/env python3
"""The quality-vs-compute tables of docs/pareto_results.md and the plots beside them, regenerated
by one command: runs `peregrine pareto` on each model (resumable: a folder's finished points are
kept), then writes per model the table of every configuration (lowest KLD first, the Pareto
fronts marked), the seeds' orderings checked on these measurements, and copies the two plots to
docs/img/.

Usage: bench/pareto_results.py [--peregrine build/bin/peregrine] [--runs bench/out/pareto]
       [--out docs/pareto_results.md] [--configs all] [MODEL_NAME=CONFIGS ...]
MODEL_NAME is a file of models/cache without .gguf (default: smollm2-135m-instruct=all);
=CONFIGS overrides --configs for that model (e.g. qwen2.5-coder-1.5b-instruct=quick).
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The seeds' claims on real weights: (claim, better config, worse config, compared on). Each
# holds when the first's KLD is at most the second's ("closer" for W8A8: to W8A16's KLD).
ORDERINGS = [
    ("GPTQ <= RTN at 4 bits", "gptq-w4-g32", "rtn-w4-g32"),
    ("AWQ <= RTN at 4 bits", "awq-w4-g32", "rtn-w4-g32"),
    ("GPTQ <= RTN at 3 bits", "gptq-w3-g32", "rtn-w3-g32"),
    ("AWQ <= RTN at 3 bits", "awq-w3-g32", "rtn-w3-g32"),
    ("SmoothQuant W8A8 closer to W8A16 than naive W8A8", "smoothquant-w8a8", "rtn-w8a8"),
    ("Wanda < magnitude at 2:4", "wanda-2:4", "magnitude-2:4"),
    ("SparseGPT < magnitude at 2:4", "sparsegpt-2:4", "magnitude-2:4"),
    ("SparseGPT <= Wanda at 2:4", "sparsegpt-2:4", "wanda-2:4"),
]


# What a reader needs to read a model's table right (qualitative: the figures are in the table).
NOTES = {
    "smollm2-135m-instruct": [
        "The reference is the PyPI file's Q4_1 weights dequantized: its values already lie on a 4-bit",
        "grid, which a re-quantization does not share, so formats are not ordered by bits alone",
        "(Q5_K_M above Q4_K_M). Its 576-wide rows are not whole 256-value super-blocks: the K-quant",
        "mixes fall back to 32-value types for them, as llama-quantize does.",
        "Pruning and 3-bit formats cost this 135M model far more than the seeds' 7B figures: small",
        "models have little redundancy. SparseGPT is below Wanda at 2:4 but not at 50% unstructured; with",
        "1024 calibration tokens, fewer than ffn_down's 1536 inputs, its Hessian there is rank-deficient",
        "(a likely cause, not tested here).",
    ],
    "qwen2.5-coder-1.5b-instruct": [
        "The reference is the PyPI file's Q4_K_M weights dequantized (a 4-bit grid, as for SmolLM2).",
        "Only the configurations without calibration ran (`quick`): GPTQ / AWQ / SparseGPT on a 1.5B model",
        "take tens of minutes each on 2 cores. The F32 reference is read in place (its copy would not fit",
        "beside the sweep in 24 GB), so its decode (and the KV points', which run on it) is slower than",
        "`generate`'s; single-sequence decode figures of one run also move with the VM's bandwidth.",
        "The FP8 E4M3 KV cache costs this model far more than the Q8_0 one; Qwen2's keys carry large",
        "outlier channels (its K bias), which E4M3's 3-bit mantissa under one scale per row likely loses.",
    ],
}


def run_sweep(args, name, configs):
    model = os.path.join(ROOT, "models", "cache", name + ".gguf")
    folder = os.path.join(args.runs, name)
    cmd = [args.peregrine, "pareto", "-m", model, "-o", folder, "--configs", configs, "-t", str(args.threads)]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True)
    with open(os.path.join(folder, "pareto.json"), encoding="utf-8") as f:
        return folder, json.load(f)


def cpu_name():
    """The CPU's model name from /proc/cpuinfo (Linux), else the machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def fmt_bytes(b):
    return f"{b / 1e6:.1f}"


def table(run):
    pts = run["points"]
    speed, size = set(run["front_speed"]), set(run["front_size"])
    lines = ["| config | technique | KLD (nats) | top-1 | ppl | ppl +% | MB | decode B/token (MB) | decode tok/s | prefill tok/s | front |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i in sorted(range(len(pts)), key=lambda k: pts[k]["kld"]):
        p = pts[i]
        front = ("S" if i in speed else "") + ("B" if i in size else "")
        lines.append(f"| {p['name']} | {p['technique']} | {p['kld']:.5f} | {p['top1']:.3f} | {p['ppl']:.3f} | "
                     f"{p['ppl_increase_pct']:+.2f} | {fmt_bytes(p['weight_bytes'])} | {fmt_bytes(p['decode_bytes_per_token'])} | "
                     f"{p['decode_tps']:.1f} | {p['prefill_tps']:.1f} | {front} |")
    return lines


def orderings(run):
    kld = {p["name"]: p["kld"] for p in run["points"]}
    lines = []
    for claim, better, worse in ORDERINGS:
        if better not in kld or worse not in kld:
            continue
        a, b = kld[better], kld[worse]
        if "closer" in claim:
            ref = kld.get("rtn-w8-pc")
            if ref is None:
                continue
            a, b = abs(a - ref), abs(b - ref)
            verdict = "holds" if a <= b else "does not hold"
            lines.append(f"- {claim}: |{better} - rtn-w8-pc| = {a:.5f} vs |{worse} - rtn-w8-pc| = {b:.5f}: **{verdict}**")
            continue
        strict = "<" in claim and "<=" not in claim
        ok = a < b if strict else a <= b
        lines.append(f"- {claim}: {better} {a:.5f} vs {worse} {b:.5f}: **{'holds' if ok else 'does not hold'}**")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peregrine", default=os.path.join(ROOT, "build", "bin", "peregrine"))
    ap.add_argument("--runs", default=os.path.join(ROOT, "bench", "out", "pareto"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "pareto_results.md"))
    ap.add_argument("--configs", default="all")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("models", nargs="*", default=["smollm2-135m-instruct"])
    args = ap.parse_args()
    img = os.path.join(os.path.dirname(args.out), "img")
    os.makedirs(img, exist_ok=True)
    out = ["# Quality vs compute on real models", "",
           "Regenerated by `bench/pareto_results.py` (it runs `peregrine pareto` per model; see",
           "[usage](usage.md#pareto)). Reference: the model's weights dequantized to F32. KLD: mean",
           "KL(reference || configuration) per token; ppl on the same tokens. Speed: one sequence, timed in",
           "the same run on the same machine. Front: S = on the quality-vs-decode-speed front, B = on the",
           "quality-vs-bytes front.", ""]
    for spec in args.models:
        name, _, configs = spec.partition("=")
        folder, run = run_sweep(args, name, configs or args.configs)
        s = run["setup"]
        out += [f"## {name}", "",
                f"{s['eval_tokens']} tokens of {s['eval_text']} in windows of {s['ctx']} (calibration: {s['calib_text']}); "
                f"timing: pp{s['n_prompt']} / tg{s['n_gen']}, {s['threads']} threads, {s['kernels']} kernels, "
                f"{cpu_name()} ({os.cpu_count()} cores).", "",
                f"![{name}: KLD vs decode tokens/s](img/pareto_{name}_speed.png)", "",
                f"![{name}: KLD vs weight bytes](img/pareto_{name}_size.png)", ""]
        out += table(run) + [""]
        out += NOTES.get(name, []) + [""] if name in NOTES else []
        checks = orderings(run)
        if checks:
            out += ["The seeds' orderings on these weights:", ""] + checks + [""]
        for axis in ("speed", "size"):
            shutil.copyfile(os.path.join(folder, f"pareto_{axis}.png"), os.path.join(img, f"pareto_{name}_{axis}.png"))
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
