#!/usr/bin/env python3
"""Cost model of tensor / pipeline parallelism on paper (issue #22, item 5).

Evaluates the formulas of docs/parallelism_cost_model.md and prints its tables in Markdown.
Standard library only; deterministic; runs in well under a second.

  tools/parallel_cost_model.py                 # every table of the doc, in the doc's order
  tools/parallel_cost_model.py --check         # hand-computed values + doc tables == this output
  tools/parallel_cost_model.py --shape llama-2-7b --bytes-per-param 2 --ranks 2 --link 100
  tools/parallel_cost_model.py --dim 3072 --layers 28 --params 3.2e9 --kv-heads 8 --head-dim 128
  tools/parallel_cost_model.py --measured runs.json  # measured decode tok/s beside the prediction

Any of --shape/--dim/--layers/--params/--kv-heads/--head-dim/--bytes-per-param/--ranks/--batch/
--link/--alpha-us/--mem-bw-gbs/--flops-tflops/--platform switches from the doc's tables to one
evaluation table over the chosen configuration (the options not given range over the doc's
values). Units inside the code are SI: bytes, seconds, bytes/s, FLOP/s.
"""
import argparse
import json
import math
import os
import sys

# ---------------------------------------------------------------------------------------------
# Stated assumptions (docs/parallelism_cost_model.md, section 2).

# name: (dim d, layers L, params p, KV heads, head_dim)
SHAPES = {
    "tinyllama-1.1b": (2048, 22, 1.1e9, 4, 64),
    "llama-2-7b": (4096, 32, 6.7e9, 32, 128),
    "llama-2-13b": (5120, 40, 13e9, 40, 128),
    "llama-2-70b": (8192, 80, 69e9, 8, 128),
}
# weight bytes per parameter b_w: F16 = 2; Q4_0 = 18 bytes per block of 32 weights.
DTYPES = {"F16": 2.0, "Q4_0": 18.0 / 32.0}
# key: (label, B = link bandwidth per direction in bytes/s, alpha = per-message latency in s)
LINKS = {
    "25": ("25 GbE TCP", 25e9 / 8, 10e-6),
    "100": ("100 GbE TCP", 100e9 / 8, 10e-6),
    "400": ("400 GbE RDMA", 400e9 / 8, 2e-6),
    "nvlink": ("NVLink 4", 450e9, 5e-6),
    "loopback": ("loopback shm", 25e9, 1e-6),
}
TCP_ALPHA = 10e-6  # alpha for a --link speed that is not a preset
# key: (label, R = memory bandwidth per rank in bytes/s, F = compute per rank in FLOP/s)
PLATFORMS = {
    "cpu": ("CPU node", 50e9, 1e12),
    "h100": ("H100 SXM", 3.35e12, 989e12),
}
ACT_BYTES = 4  # a: bytes per activation element on the wire (f32)
KV_BYTES = 2  # e: bytes per K/V element of a shipped KV cache (F16)
PREFILL_CHUNK = 512  # n of a prefill chunk
RANKS = (2, 4, 8)
MICRO_BATCHES = (1, 2, 4, 8, 16, 32)
CPU_LINKS = ("25", "100", "400")
GPU_LINKS = ("100", "400", "nvlink")
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "parallelism_cost_model.md")


# ---------------------------------------------------------------------------------------------
# The formulas.

def weight_bytes(params, bpp):
    """W = p * b_w (bytes)."""
    return params * bpp


def tp_bytes_per_layer(n, dim, ranks, act=ACT_BYTES):
    """Bytes each rank sends (and receives) per layer: 2 all-reduces x 2(N-1)/N x n*d*a."""
    return 2 * 2 * (ranks - 1) / ranks * n * dim * act


def pp_bytes_per_boundary(n, dim, act=ACT_BYTES):
    """Bytes one stage sends to the next per forward: n*d*a."""
    return n * dim * act


def allreduce_time(nbytes, ranks, alpha, bw):
    """Ring all-reduce, alpha-beta: 2(N-1)*alpha + 2(N-1)/N * bytes / B (s); 0 for N = 1."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * nbytes / bw


def p2p_time(nbytes, alpha, bw):
    """One message: alpha + bytes / B (s)."""
    return alpha + nbytes / bw


def compute_time(n, wbytes, params, mem_bw, flops):
    """Roofline time of one forward of n tokens on one rank holding all weights:
    max(W / R, 2*p*n / F) (s)."""
    return max(wbytes / mem_bw, 2 * params * n / flops)


def ridge_rows(bpp, mem_bw, flops):
    """n_r = b_w * F / (2 R): tokens per step where W/R = 2pn/F."""
    return bpp * flops / (2 * mem_bw)


def tp_step_time(n, ranks, dim, layers, params, bpp, mem_bw, flops, alpha, bw, act=ACT_BYTES):
    """T_step(N) = max(W/(N R), 2pn/(N F)) + 2 L T_allreduce(n d a) (s)."""
    t_comp = compute_time(n, weight_bytes(params, bpp), params, mem_bw, flops) / ranks
    return t_comp + 2 * layers * allreduce_time(n * dim * act, ranks, alpha, bw)


def tp_speedup(n, ranks, dim, layers, params, bpp, mem_bw, flops, alpha, bw, act=ACT_BYTES):
    """S(N) = T_step(1) / T_step(N)."""
    t1 = tp_step_time(n, 1, dim, layers, params, bpp, mem_bw, flops, alpha, bw, act)
    return t1 / tp_step_time(n, ranks, dim, layers, params, bpp, mem_bw, flops, alpha, bw, act)


def min_layer_bytes(n, ranks, dim, mem_bw, alpha, bw, act=ACT_BYTES):
    """W/L >= 4 R (N alpha + n d a / B): the weight bytes per layer from which TP pays in a
    memory-bound step of n tokens (the same condition as n <= n_m)."""
    return 4 * mem_bw * (ranks * alpha + n * dim * act / bw)


def memory_bound_break_even(ranks, dim, layers, params, bpp, mem_bw, alpha, bw, act=ACT_BYTES):
    """n_m = (W / (2 L N R) - 2 alpha) * N B / (2 d a): largest n with T_step(N) <= T_step(1)
    while the step is memory-bound (may be < 1: TP never pays)."""
    w = weight_bytes(params, bpp)
    return (w / (2 * layers * ranks * mem_bw) - 2 * alpha) * ranks * bw / (2 * dim * act)


def bw_min(dim, layers, params, flops, act=ACT_BYTES):
    """B_min = 2 d a L F / p: below it TP loses in the compute-bound limit (n -> inf), any N."""
    return 2 * dim * act * layers * flops / params


def break_even(ranks, dim, layers, params, bpp, mem_bw, flops, alpha, bw, act=ACT_BYTES):
    """(n_star, n_again): TP pays for 1 <= n <= n_star (math.inf: every n; 0: not even n = 1);
    n_again: when it stops paying in the memory-bound range but pays again for n >= n_again
    in the compute-bound range, else None."""
    n_m = memory_bound_break_even(ranks, dim, layers, params, bpp, mem_bw, alpha, bw, act)
    n_r = ridge_rows(bpp, mem_bw, flops)
    if n_m >= n_r:  # holds at the ridge, so for every larger n as well (see the doc)
        return math.inf, None
    n_star = max(0, math.floor(n_m))
    # compute-bound: 2 alpha <= n (p/(L N F) - 2 d a/(N B))
    coef = params / (layers * ranks * flops) - 2 * dim * act / (ranks * bw)
    n_again = None
    if coef > 0:
        n_again = max(math.ceil(2 * alpha / coef), math.ceil(n_r))
    return n_star, n_again


def bubble_fraction(stages, micro_batches):
    """Idle fraction of a flushed pipeline: (P-1) / (M+P-1)."""
    return (stages - 1) / (micro_batches + stages - 1)


def pp_comm_per_forward(n, stages, dim, alpha, bw, act=ACT_BYTES):
    """(P-1) * (alpha + n d a / B) (s): the hand-overs on one micro-batch's path."""
    return (stages - 1) * p2p_time(pp_bytes_per_boundary(n, dim, act), alpha, bw)


def tp_comm_per_forward(n, ranks, dim, layers, alpha, bw, act=ACT_BYTES):
    """2 L T_allreduce(n d a) (s)."""
    return 2 * layers * allreduce_time(n * dim * act, ranks, alpha, bw)


def kv_bytes_per_token(layers, kv_heads, head_dim, elem=KV_BYTES):
    """2 (K and V) * L * n_kv_heads * head_dim * e (bytes per prompt token)."""
    return 2 * layers * kv_heads * head_dim * elem


# ---------------------------------------------------------------------------------------------
# Formatting.

def num(x):
    """3 significant digits without exponent notation."""
    if x == 0:
        return "0"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:#.3g}"


def n_text(n_star, n_again):
    """The batch sizes n >= 1 where S >= 1: 'all', 'none', '1–n*', '≥ n', or '1–n*, ≥ n'."""
    if n_star == math.inf:
        return "all"
    parts = [f"1–{n_star:,}"] if n_star >= 1 else []
    if n_again is not None:
        parts.append(f"≥ {n_again:,}")
    return ", ".join(parts) if parts else "none"


def table(title, header, rows):
    out = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def link_alpha_bw(key):
    return LINKS[key][2], LINKS[key][1]


# ---------------------------------------------------------------------------------------------
# The doc's tables.

def t_shapes():
    rows = []
    for name, (d, layers, p, kvh, hd) in SHAPES.items():
        row = [name, d, layers, f"{p:.2g}", kvh, hd]
        row += [" / ".join(num(weight_bytes(p, bpp) / div) for bpp in DTYPES.values())
                for div in (1e9, layers * 1e6)]
        row.append(f"{pp_bytes_per_boundary(1, d):,.0f}")
        row.append(" / ".join(f"{tp_bytes_per_layer(1, d, r):,.0f}" for r in RANKS))
        rows.append(row)
    dts = "/".join(DTYPES)
    head = ["model", "d", "L", "p", "n_kv", "h", f"W (GB), {dts}", f"W/L (MB), {dts}",
            "PP bytes per boundary", "TP bytes per layer, N=2/4/8"]
    return table("T1. Shapes, weight bytes W = p·b_w, W per layer, and bytes each rank sends per token (n = 1, f32)",
                 head, rows)


def t_allreduce():
    sizes = [(1, 4096), (16, 4096), (PREFILL_CHUNK, 4096)]
    rows = []
    for key, (label, bw, alpha) in LINKS.items():
        row = [label, num(bw / 1e9), num(alpha * 1e6)]
        for n, d in sizes:
            row.append(" / ".join(num(allreduce_time(n * d * ACT_BYTES, r, alpha, bw) * 1e6)
                                  for r in RANKS))
        rows.append(row)
    head = ["link", "B (GB/s)", "α (µs)"]
    head += [f"n={n}: {n * d * ACT_BYTES // 1024:,} KiB, N=2/4/8" for n, d in sizes]
    return table("T2. Ring all-reduce time T_ar (µs) of n·d·4 bytes, d = 4096", head, rows)


def t_min_layer_bytes():
    rows = []
    for platform, links in (("cpu", CPU_LINKS), ("h100", GPU_LINKS)):
        label, mem_bw, _ = PLATFORMS[platform]
        for key in links:
            alpha, bw = link_alpha_bw(key)
            row = [label, LINKS[key][0]]
            for n in (1, 16):
                row.append(" / ".join(num(min_layer_bytes(n, r, 4096, mem_bw, alpha, bw) / 1e6) for r in RANKS))
            rows.append(row)
    return table("T3. Smallest W/L (MB) for which TP pays in decode: 4R(Nα + n·d·a/B), d = 4096, while n ≤ n_r",
                 ["platform", "link", "n=1: N=2/4/8", "n=16: N=2/4/8"], rows)


def t_decode(platform, links):
    label, mem_bw, flops = PLATFORMS[platform]
    rows = []
    for name, (d, layers, p, _, _) in SHAPES.items():
        for dt, bpp in DTYPES.items():
            row = [name, dt, num(weight_bytes(p, bpp) / mem_bw * 1e3)]
            for key in links:
                alpha, bw = link_alpha_bw(key)
                row.append(" / ".join(num(tp_speedup(1, r, d, layers, p, bpp, mem_bw, flops, alpha, bw))
                                      for r in RANKS))
                row.append(" / ".join(n_text(*break_even(r, d, layers, p, bpp, mem_bw, flops, alpha, bw))
                                      for r in RANKS))
            rows.append(row)
    head = ["model", "dtype", "W/R (ms)"]
    for key in links:
        head += [f"{LINKS[key][0]}: S(n=1), N=2/4/8", "n with S ≥ 1, N=2/4/8"]
    ridges = ", ".join(f"{dt} {num(ridge_rows(bpp, mem_bw, flops))}" for dt, bpp in DTYPES.items())
    title = (f"T{4 if platform == 'cpu' else 5}. Decode, {label} (R = {num(mem_bw / 1e9)} GB/s, "
             f"F = {num(flops / 1e12)} TFLOP/s; ridge n_r: {ridges})")
    return table(title, head, rows)


def t_prefill():
    rows = []
    for name, (d, layers, p, _, _) in SHAPES.items():
        row = [name]
        for platform, links in (("cpu", CPU_LINKS), ("h100", GPU_LINKS)):
            _, mem_bw, flops = PLATFORMS[platform]
            for key in links:
                alpha, bw = link_alpha_bw(key)
                row.append(" / ".join(num(tp_speedup(PREFILL_CHUNK, r, d, layers, p, 2.0, mem_bw, flops,
                                                     alpha, bw)) for r in RANKS))
        row += [num(bw_min(d, layers, p, PLATFORMS[k][2]) / 1e9) for k in ("cpu", "h100")]
        rows.append(row)
    head = ["model"]
    head += [f"CPU {LINKS[k][0]}" for k in CPU_LINKS] + [f"H100 {LINKS[k][0]}" for k in GPU_LINKS]
    head += ["B_min CPU (GB/s)", "B_min H100 (GB/s)"]
    return table(f"T6. Prefill chunk of n = {PREFILL_CHUNK} tokens, F16: speedup S at N=2/4/8", head, rows)


def t_pp():
    alpha25, bw25 = link_alpha_bw("25")
    rows = []
    for name, (d, layers, _, _, _) in SHAPES.items():
        row = [name]
        for n in (1, PREFILL_CHUNK):
            row.append(" / ".join(num(tp_comm_per_forward(n, r, d, layers, alpha25, bw25) * 1e6) for r in RANKS))
            row.append(" / ".join(num(pp_comm_per_forward(n, r, d, alpha25, bw25) * 1e6) for r in RANKS))
        rows.append(row)
    head = ["model", "n=1: TP, N=2/4/8", "n=1: PP, P=2/4/8", f"n={PREFILL_CHUNK}: TP, N=2/4/8",
            f"n={PREFILL_CHUNK}: PP, P=2/4/8"]
    return table("T7. Communication time per forward (µs) on 25 GbE TCP: TP 2L·T_ar vs PP (P−1)·(α + n·d·a/B)",
                 head, rows)


def t_bubble():
    rows = [[f"P={s}"] + [f"{bubble_fraction(s, m):.3f}" for m in MICRO_BATCHES] for s in RANKS]
    return table("T8. Bubble (idle) fraction (P−1)/(M+P−1) of a flushed pipeline",
                 ["stages"] + [f"M={m}" for m in MICRO_BATCHES], rows)


def t_kv():
    rows = []
    for name, (d, layers, p, kvh, hd) in SHAPES.items():
        kv = kv_bytes_per_token(layers, kvh, hd)
        row = [name, f"{kv:,}"]
        row += [num(kv / LINKS[k][1] * 1e6) for k in ("25", "100", "400", "nvlink")]
        row += [num(2 * p / PLATFORMS[k][2] * 1e6) for k in ("cpu", "h100")]
        rows.append(row)
    head = ["model", "KV bytes per token (F16)"]
    head += [f"ship on {LINKS[k][0]} (µs)" for k in ("25", "100", "400", "nvlink")]
    head += ["prefill compute CPU (µs)", "prefill compute H100 (µs)"]
    return table("T9. Disaggregated prefill: KV bytes and times per prompt token", head, rows)


def doc_tables():
    return [t_shapes(), t_allreduce(), t_min_layer_bytes(), t_decode("cpu", CPU_LINKS), t_decode("h100", GPU_LINKS),
            t_prefill(), t_pp(), t_bubble(), t_kv()]


# ---------------------------------------------------------------------------------------------
# A custom evaluation and measured runs.

def custom(args):
    if args.shape:
        shapes = {args.shape: SHAPES[args.shape]}
    else:
        shapes = dict(SHAPES)
    if any(v is not None for v in (args.dim, args.layers, args.params, args.kv_heads, args.head_dim)):
        base = SHAPES[args.shape] if args.shape else (None, None, None, None, None)
        vals = [args.dim, args.layers, args.params, args.kv_heads, args.head_dim]
        shape = tuple(v if v is not None else b for v, b in zip(vals, base))
        if any(v is None for v in shape[:3]):
            sys.exit("error: a custom shape needs --dim, --layers and --params (or --shape)")
        shapes = {args.shape or "custom": shape}
    dtypes = {f"{args.bytes_per_param:g} B/param": args.bytes_per_param} if args.bytes_per_param else DTYPES
    ranks = [args.ranks] if args.ranks else list(RANKS)
    if args.link:
        key = args.link.lower()
        if key in LINKS:
            label, bw, alpha = LINKS[key]
        else:
            try:
                gbits = float(key)
            except ValueError:
                sys.exit(f"error: --link '{args.link}' is not a speed in Gb/s, nvlink or loopback")
            label, bw, alpha = f"{gbits:g} Gb/s", gbits * 1e9 / 8, TCP_ALPHA
        links = [(label, bw, args.alpha_us * 1e-6 if args.alpha_us is not None else alpha)]
    else:
        links = [(lab, bw, args.alpha_us * 1e-6 if args.alpha_us is not None else a)
                 for lab, bw, a in LINKS.values()]
    plabel, mem_bw, flops = PLATFORMS[args.platform]
    if args.mem_bw_gbs:
        mem_bw = args.mem_bw_gbs * 1e9
    if args.flops_tflops:
        flops = args.flops_tflops * 1e12
    n = args.batch
    rows = []
    for name, (d, layers, p, kvh, hd) in shapes.items():
        for dt, bpp in dtypes.items():
            for r in ranks:
                for label, bw, alpha in links:
                    t1 = tp_step_time(n, 1, d, layers, p, bpp, mem_bw, flops, alpha, bw)
                    tn = tp_step_time(n, r, d, layers, p, bpp, mem_bw, flops, alpha, bw)
                    t_ar = allreduce_time(n * d * ACT_BYTES, r, alpha, bw)
                    kv = f"{kv_bytes_per_token(layers, kvh, hd):,}" if kvh and hd else "-"
                    rows.append([name, dt, r, label, f"{tp_bytes_per_layer(n, d, r):,.0f}", num(t_ar * 1e6),
                                 num(t1 * 1e3), num(tn * 1e3), num(t1 / tn),
                                 n_text(*break_even(r, d, layers, p, bpp, mem_bw, flops, alpha, bw)),
                                 num(n / tn), num(pp_comm_per_forward(n, r, d, alpha, bw) * 1e6), kv])
    head = ["model", "dtype", "N", "link", "TP bytes/layer/rank", "T_ar (µs)", "T_step(1) (ms)",
            "T_step(N) (ms)", "S", "n where S ≥ 1", "tok/s at N", "PP comm/forward (µs)", "KV B/token"]
    title = (f"Evaluation: n = {n}, {plabel} R = {num(mem_bw / 1e9)} GB/s, "
             f"F = {num(flops / 1e12)} TFLOP/s")
    return table(title, head, rows)


def measured(path):
    """Each record: {"model", "dim", "layers", "params", "bytes_per_param", "mode", "ranks",
    "decode_tps", "mem_bw_gbs" (per rank, while all ranks run), "allreduce_us" (per call; null:
    the loopback alpha-beta model), optional "batch" (default 1)}. Predicted step time:
    W / (ranks R) + [ranks > 1] 2 L T_ar (memory-bound decode); for a pipeline (mode starting
    with "pp": one sequence's stages run one after the other) W / R + (ranks - 1) hops of
    alpha + n d a / B on loopback."""
    with open(path, encoding="utf-8") as f:
        records = json.load(f)
    _, loop_bw, loop_alpha = LINKS["loopback"]
    rows = []
    for rec in records:
        ranks = int(rec.get("ranks", 1))
        n = int(rec.get("batch", 1))
        d, layers = int(rec["dim"]), int(rec["layers"])
        w = weight_bytes(float(rec["params"]), float(rec["bytes_per_param"]))
        mem_bw = float(rec["mem_bw_gbs"]) * 1e9
        if ranks > 1 and rec.get("allreduce_us") is not None:
            t_ar = float(rec["allreduce_us"]) * 1e-6
            src = "measured"
        else:
            t_ar = allreduce_time(n * d * ACT_BYTES, ranks, loop_alpha, loop_bw)
            src = "α-β loopback" if ranks > 1 else "-"
        if str(rec.get("mode", "")).startswith("pp"):
            t_ar = loop_alpha + n * d * ACT_BYTES / loop_bw  # one stage-to-stage hop
            src = "α-β loopback hop"
            t = w / mem_bw + (ranks - 1) * t_ar
        else:
            t = w / (ranks * mem_bw) + (2 * layers * t_ar if ranks > 1 else 0.0)
        pred = n / t
        meas = float(rec["decode_tps"])
        rows.append([rec.get("model", "?"), f"{float(rec['bytes_per_param']):g}", rec.get("mode", "?"), ranks,
                     num(mem_bw / 1e9), f"{num(t_ar * 1e6)} ({src})" if ranks > 1 else "-",
                     num(meas), num(pred), f"{meas / pred:.3f}"])
    head = ["model", "bytes/param", "mode", "ranks", "R per rank (GB/s)", "T_ar / hop (µs)", "decode tok/s",
            "predicted tok/s", "measured / predicted"]
    return table("Measured vs predicted decode", head, rows)


# ---------------------------------------------------------------------------------------------
# Self-check.

def check():
    failures = []

    def expect(what, got, want, rel=1e-12):
        if not math.isclose(got, want, rel_tol=rel, abs_tol=0.0):
            failures.append(f"{what}: got {got!r}, want {want!r}")

    d, layers, p, kvh, hd = SHAPES["tinyllama-1.1b"]
    # 2 all-reduces x 2(2-1)/2 x 2048*4 bytes = 16384 bytes per layer per rank at N = 2.
    expect("TP bytes, tinyllama, n=1, N=2", tp_bytes_per_layer(1, d, 2), 16384.0)
    # N = 8: 2 x 2*7/8 x 8192 = 28672.
    expect("TP bytes, tinyllama, n=1, N=8", tp_bytes_per_layer(1, d, 8), 28672.0)
    expect("PP bytes per boundary, tinyllama, n=1", pp_bytes_per_boundary(1, d), 8192.0)
    # 25 GbE TCP, N = 2, 8192 bytes: 2*10 us + 8192 / 3.125e9 s = 22.62144 us.
    alpha, bw = link_alpha_bw("25")
    expect("T_ar 8 KiB 25GbE N=2", allreduce_time(8192, 2, alpha, bw), 22.62144e-6)
    expect("Q4_0 bytes per parameter", DTYPES["Q4_0"], 0.5625)
    expect("W llama-2-7b Q4_0", weight_bytes(6.7e9, DTYPES["Q4_0"]), 3.76875e9)
    expect("bubble P=4 M=4", bubble_fraction(4, 4), 3 / 7)
    expect("KV bytes/token tinyllama", kv_bytes_per_token(layers, kvh, hd), 22528)
    expect("KV bytes/token llama-2-7b", kv_bytes_per_token(32, 32, 128), 524288)
    expect("KV bytes/token llama-2-70b", kv_bytes_per_token(80, 8, 128), 327680)
    expect("ridge H100 F16", ridge_rows(2.0, 3.35e12, 989e12), 989e12 / 3.35e12)
    # Decode of tinyllama F16 on a CPU node at N=2 over 25 GbE: T1 = 2.2e9/50e9 = 44 ms,
    # T2 = 22 ms + 44 * 22.62144 us = 22.99534336 ms.
    _, mem_bw, flops = PLATFORMS["cpu"]
    expect("T_step(2) tinyllama F16 CPU 25GbE",
           tp_step_time(1, 2, d, layers, p, 2.0, mem_bw, flops, alpha, bw), 22e-3 + 44 * 22.62144e-6)
    # The closed-form memory-bound break-even agrees with a scan of S(n).
    _, mem_bw, flops = PLATFORMS["h100"]
    a_nv, b_nv = link_alpha_bw("nvlink")
    for name, (d2, l2, p2, _, _) in SHAPES.items():
        for r in RANKS:
            n_star, n_again = break_even(r, d2, l2, p2, 2.0, mem_bw, flops, a_nv, b_nv)
            s = [tp_speedup(n, r, d2, l2, p2, 2.0, mem_bw, flops, a_nv, b_nv) >= 1 for n in range(1, 2049)]
            first_fail = s.index(False) if False in s else math.inf
            if n_star != first_fail:
                failures.append(f"break-even {name} N={r}: closed form {n_star}, scan {first_fail}")
            if n_again is not None and n_again <= len(s) and (not all(s[n_again - 1:]) or s[n_again - 2]):
                failures.append(f"break-even {name} N={r}: pays again from {n_again} disagrees with the scan")
            # n_m and the W/L form are the same condition.
            w_l = weight_bytes(p2, 2.0) / l2
            for n in (1, 16, 64):
                pays = w_l >= min_layer_bytes(n, r, d2, mem_bw, a_nv, b_nv)
                if pays != (n <= memory_bound_break_even(r, d2, l2, p2, 2.0, mem_bw, a_nv, b_nv)):
                    failures.append(f"W/L condition {name} N={r} n={n} disagrees with n_m")
    # The doc's tables are this script's output.
    if os.path.exists(DOC):
        with open(DOC, encoding="utf-8") as f:
            doc = f.read()
        for t in doc_tables():
            if t not in doc:
                failures.append(f"{os.path.relpath(DOC)} does not hold the table '{t.splitlines()[0]}' "
                                "as printed")
    for msg in failures:
        print("FAIL " + msg, file=sys.stderr)
    print("check: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), help="one of the doc's shapes")
    ap.add_argument("--dim", type=int, help="custom shape: model dim d")
    ap.add_argument("--layers", type=int, help="custom shape: layers L")
    ap.add_argument("--params", type=float, help="custom shape: parameters p")
    ap.add_argument("--kv-heads", type=int, help="custom shape: KV heads (for KV bytes)")
    ap.add_argument("--head-dim", type=int, help="custom shape: head dim (for KV bytes)")
    ap.add_argument("--bytes-per-param", type=float, help="b_w (default: F16 2 and Q4_0 0.5625)")
    ap.add_argument("--ranks", type=int, help="N (default 2, 4, 8)")
    ap.add_argument("--batch", type=int, default=None, help="n: tokens per step (default 1)")
    ap.add_argument("--link", help="link speed in Gb/s (25, 100, 400 or any), nvlink or loopback")
    ap.add_argument("--alpha-us", type=float, help="per-message latency α in µs (default: the link's)")
    ap.add_argument("--mem-bw-gbs", type=float, help="R: memory bandwidth per rank in GB/s")
    ap.add_argument("--flops-tflops", type=float, help="F: compute per rank in TFLOP/s")
    ap.add_argument("--platform", choices=sorted(PLATFORMS), default=None,
                    help="R and F defaults: cpu (50 GB/s, 1 TFLOP/s) or h100 (3.35 TB/s, 989 TFLOP/s)")
    ap.add_argument("--measured", metavar="FILE.json", help="measured runs beside the prediction")
    ap.add_argument("--check", action="store_true", help="assert hand-computed values; exit 1 on mismatch")
    args = ap.parse_args()
    if args.check:
        return check()
    if args.ranks is not None and args.ranks < 1:
        ap.error("--ranks must be at least 1")
    if args.measured:
        try:
            print(measured(args.measured))
        except (OSError, ValueError, KeyError, TypeError) as err:
            sys.exit(f"error: {args.measured}: {type(err).__name__}: {err}")
        return 0
    custom_opts = (args.shape, args.dim, args.layers, args.params, args.kv_heads, args.head_dim,
                   args.bytes_per_param, args.ranks, args.batch, args.link, args.alpha_us, args.mem_bw_gbs,
                   args.flops_tflops, args.platform)
    if any(v is not None for v in custom_opts):
        args.batch = args.batch or 1
        args.platform = args.platform or "cpu"
        print(custom(args))
        return 0
    print("\n\n".join(doc_tables()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. piped into head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
