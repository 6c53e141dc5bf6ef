#!/usr/bin/env python3
"""Plots a `peregrine pareto` run: DIR/pareto.json -> DIR/pareto_speed.png (KLD vs decode
tokens/s) and DIR/pareto_size.png (KLD vs weight bytes), each point coloured by technique,
the Pareto front drawn as a line and its points labelled.

Usage: tools/pareto_plot.py DIR   (run by `peregrine pareto`; matplotlib from scripts/setup.sh)
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"float": "tab:gray", "gguf": "tab:blue", "int": "tab:green", "w8a8": "tab:purple",
           "fp8": "tab:brown", "prune": "tab:red", "kv": "tab:orange"}


def plot(run, axis, path):
    points, setup = run["points"], run["setup"]
    front = run["front_speed" if axis == "speed" else "front_size"]
    x_of = (lambda p: p["decode_tps"]) if axis == "speed" else (lambda p: p["weight_bytes"] / 1e6)
    # KLD spans decades and the reference sits at 0: a symmetric log axis, linear below 1e-4.
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=110)
    for tech, colour in COLOURS.items():
        pts = [p for p in points if p["technique"] == tech]
        if pts:
            ax.scatter([x_of(p) for p in pts], [p["kld"] for p in pts], s=36, c=colour, label=tech, zorder=3)
    fp = [points[i] for i in front]
    ax.plot([x_of(p) for p in fp], [p["kld"] for p in fp], "-", c="black", lw=1.2, zorder=2, label="Pareto front")
    for i, p in enumerate(points):
        on_front = i in front
        ax.annotate(p["name"], (x_of(p), p["kld"]), textcoords="offset points", xytext=(6, 4),
                    fontsize=8 if on_front else 6, color="black" if on_front else "dimgray")
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("mean KL divergence from the F32 reference (nats, lower is better)")
    if axis == "speed":
        ax.set_xlabel(f"decode tokens/s, 1 sequence ({setup['threads']} threads, {setup['kernels']} kernels; higher is better)")
    else:
        ax.set_xlabel("weights in memory (MB; lower is better)")
    ax.set_title(f"{setup['model']}: quality vs {'speed' if axis == 'speed' else 'size'} "
                 f"({setup['eval_tokens']} tokens of {setup['eval_text']})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    with open(os.path.join(folder, "pareto.json"), encoding="utf-8") as f:
        run = json.load(f)
    for axis in ("speed", "size"):
        plot(run, axis, os.path.join(folder, f"pareto_{axis}.png"))


if __name__ == "__main__":
    main()
