#!/usr/bin/python3
"""Issue #20's distillation table: a 2-layer student of stories260K distilled under each loss
(forward KL, reverse KL, JSD, TVD; on text windows and, for the two KLs, on the teacher's own
samples) and the same shape trained on the text alone (cross-entropy, no teacher), each compared
with the teacher (KL divergence, top-1 agreement, perplexity) and used as its draft model (mean
accepted length tau, acceptance rate, speedup; greedy and sampled at temperature 1), beside the
trained draft heads (Medusa-1 heads; an EAGLE-1 head drafting chains and EAGLE-2 dynamic trees)
and the free drafters (prompt lookup, layer skip with the teacher's first 2 layers, a Q4_0 copy
of the teacher).

Training text: ../shared/data/tinystories/tinystories_valid_excerpt.txt.
Evaluation text (KLD, ppl, draft prompts): ../shared/data/tinystories/tinystories_sample.txt
(never trained on).

Usage: bench/distill_results.py [--peregrine build/bin/peregrine] [--shared ../shared]
       [--out docs/distillation_results.md] [--threads 2] [--steps 400] [--seed 0]
Prints the markdown table and writes it to --out (with the commands' parameters).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# (label, distill flags) in table order.
STUDENTS = [("distilled, forward KL", ["--loss", "fkl"]),
            ("distilled, reverse KL", ["--loss", "rkl"]),
            ("distilled, JSD", ["--loss", "jsd"]),
            ("distilled, TVD", ["--loss", "tvd"]),
            ("distilled, forward KL, on teacher samples", ["--loss", "fkl", "--on-policy"]),
            ("distilled, reverse KL, on teacher samples", ["--loss", "rkl", "--on-policy"]),
            ("same shape, text only (no KD)", ["--loss", "ce"])]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return r.stdout


def spec_rows(spec, flags):
    """tau, acceptance and speedup of the drafter, greedy and sampled at temperature 1."""
    return [spec_row(run(spec + flags + ["--spec-temp", t])) for t in ["0", "1"]]


CHAIN = ["--spec-variants", "chain", "--draft-max", "4"]


def tree(nodes, branching):
    return ["--spec-variants", "tree", "--draft-max", str(nodes), "--draft-branching", str(branching)]


def cells(rows):
    return " | ".join(f"{tau:.2f} | {acc:.3f} | {speed:.2f}x" for tau, acc, speed in rows)


def spec_row(out):
    """(tau, acceptance, speedup) of the drafter's line in bench --spec's first table."""
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0] == "story" and cells[1] != "none":
            return float(cells[2]), float(cells[3]), float(cells[5].rstrip("x"))
    sys.exit(f"no drafter row in:\n{out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peregrine", default="build/bin/peregrine")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--out", default="docs/distillation_results.md")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--steps", default="400")
    ap.add_argument("--seed", default="0")
    ap.add_argument("--medusa-steps", default="400")
    ap.add_argument("--eagle-steps", default="1500")
    a = ap.parse_args()
    teacher = f"{a.shared}/models/stories260K/stories260K.bin"
    train = f"{a.shared}/data/tinystories/tinystories_valid_excerpt.txt"
    evaluation = f"{a.shared}/data/tinystories/tinystories_sample.txt"
    distill_flags = ["--student-shape", "layers=2", "--steps", a.steps, "--batch", "8", "--seq", "128", "--lr", "2e-3",
                     "--warmup", "20", "--seed", a.seed, "-t", a.threads]
    spec = [a.peregrine, "bench", "-m", teacher, "--spec-text", evaluation, "--spec-tasks", "story", "--spec-prompts", "4",
            "-t", a.threads]
    header = ["| drafter | KLD to teacher | top-1 | student ppl | greedy tau | greedy acceptance | greedy speedup | "
              "T=1 tau | T=1 acceptance | T=1 speedup |", "|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, flags) in enumerate(STUDENTS):
            student = os.path.join(tmp, f"student-{i}.gguf")
            run([a.peregrine, "distill", "-m", teacher, "-o", student, "--data", train] + flags + distill_flags)
            k = json.loads(run([a.peregrine, "eval", "kld", "-m", student, "--ref", teacher, "-f", evaluation, "--json",
                                "-t", a.threads]))
            rows.append(f"| {label} (`{' '.join(flags)}`) | {k['kld']:.4f} | {k['top1']:.3f} | {k['ppl']:.2f} | "
                        f"{cells(spec_rows(spec, ['--spec', 'draft', '--draft-model', student]))} |")
            print(rows[-1], flush=True)
        medusa, eagle = os.path.join(tmp, "medusa"), os.path.join(tmp, "eagle")
        head_flags = ["-m", teacher, "--data", train, "--seed", a.seed, "-t", a.threads]
        run([a.peregrine, "train-draft", "--kind", "medusa", "-o", medusa, "--steps", a.medusa_steps, "--lr", "1e-2"] + head_flags)
        run([a.peregrine, "train-draft", "--kind", "eagle", "-o", eagle, "--steps", a.eagle_steps] + head_flags)
        for label, flags in [("Medusa-1 heads (4), chain", ["--spec", "medusa", "--draft-model", medusa] + CHAIN),
                             ("Medusa-1 heads (4), tree of 16, b=4", ["--spec", "medusa", "--draft-model", medusa] + tree(16, 4)),
                             ("EAGLE-1 head, chain", ["--spec", "eagle", "--draft-model", eagle] + CHAIN),
                             ("EAGLE-2 tree of 16, b=4", ["--spec", "eagle", "--draft-model", eagle] + tree(16, 4)),
                             ("EAGLE-2 tree of 64, b=8", ["--spec", "eagle", "--draft-model", eagle] + tree(64, 8)),
                             ("prompt lookup (PLD)", ["--spec", "pld"] + CHAIN),
                             ("prompt lookup (PLD), tree of 16, b=4", ["--spec", "pld"] + tree(16, 4)),
                             ("layer skip, first 2 of 5 layers", ["--spec", "layerskip", "--draft-layers", "2"] + CHAIN),
                             ("Q4_0 copy of the teacher", ["--spec", "quant", "--draft-dtype", "q4_0"] + CHAIN),
                             ("Q4_0 copy of the teacher, tree of 16, b=4", ["--spec", "quant", "--draft-dtype", "q4_0"] + tree(16, 4))]:
            rows.append(f"| {label} | | | | {cells(spec_rows(spec, flags))} |")
            print(rows[-1], flush=True)
    doc = ["# Distillation results", "",
           "Produced by `bench/distill_results.py` (see its docstring). Teacher: stories260K (5 layers, dim 64). Students: "
           "2 layers, initialized from the teacher's first and last blocks, embedding and head "
           f"(`--student-shape layers=2`), trained {a.steps} steps of 8 x 128 tokens on "
           "`tinystories_valid_excerpt.txt` (`peregrine distill " + " ".join(distill_flags[:-2]) + "`). KLD (mean "
           "KL(teacher || student)), top-1 agreement and perplexity on `tinystories_sample.txt`, which no run trained "
           "on; tau (mean tokens accepted per target forward) and acceptance from `peregrine bench --spec ... "
           "--spec-tasks story` on prompts from the same text, chains of 4 drafted tokens, greedy and sampled at "
           "temperature 1 over the whole vocabulary (`--spec-temp 1`, seeded per prompt). On-policy rows train on "
           "the teacher's own samples (`--on-policy`: 8 text tokens, the rest drawn from the teacher). Draft heads: "
           f"`peregrine train-draft --kind medusa --steps {a.medusa_steps} --lr 1e-2` (4 heads of one ResBlock) and "
           f"`--kind eagle --steps {a.eagle_steps}` (lr 1e-2) on the same training text; their trees are "
           "EAGLE-2's dynamic trees (`--draft-branching b`: each level expands the b best nodes by cumulative draft "
           "probability into their b most probable children, the tree keeps the best `--draft-max` nodes). stories260K's "
           "decode step takes ~0.03 ms, so any model drafter costs about half a target step here and no model drafter "
           "speeds it up: the speedup column shows that cost, tau and acceptance the quality.", ""] + header + rows
    with open(a.out, "w") as f:
        f.write("\n".join(doc) + "\n")
    print("\n".join(header + rows))


if __name__ == "__main__":
    main()
