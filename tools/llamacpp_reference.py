#!/usr/bin/env python3
"""Regenerates the committed llama.cpp reference files tests/reference/llamacpp/NAME.json for the
real GGUF models of models/real_models.tsv. llama.cpp is the baseline engine; none of its code is
in this repository: this script only runs its binaries (built elsewhere) and records what they
output. The JSON files are committed and are written only by this script; rerun it after changing
tests/data/real_models/tokenize_texts.json, the prompts below or the llama.cpp version.

Usage:
  python3 tools/llamacpp_reference.py --bin LLAMA_BIN_DIR [--models-dir DIR] [--out DIR]
      [--texts JSON] [--wikitext FILE] [--threads N] [--llamacpp-version STR]
      [--steps tokenize,greedy,perplexity] [NAME...]
  LLAMA_BIN_DIR   holds llama-tokenize, llama-server and llama-perplexity
  --models-dir    NAME.gguf files (default $PEREGRINE_MODEL_CACHE or models/cache); each file's
                  SHA-256 is checked against the manifest first
  --out           default tests/reference/llamacpp
  --wikitext      default ${PEREGRINE_SHARED_DIR:-../shared}/data/wikitext-2/wiki.test.raw
  --steps         a subset regenerates only those sections and keeps the others of an existing file
  NAME...         manifest names (default: every model of the manifest)
Standard library only (Python 3.11). Generated with llama.cpp b10470 (34af94cd), -t 2, on CPU.

What it runs, per model, and what each JSON section means
---------------------------------------------------------
"tokenize": one id list per string of tokenize_texts.json, in order, from
    llama-tokenize -m MODEL --ids --log-disable --stdin --no-escape   (text on stdin as UTF-8)
  (recorded as "tokenize_flags"). These are llama-tokenize's defaults apart from the input path:
  - special tokens ARE parsed (LLAMA_EXAMPLE_TOKENIZE sets parse_special = true; text such as
    "<|im_start|>" becomes the control token's id when the vocab has it);
  - add_special = llama_vocab_get_add_bos(vocab) (i.e. tokenizer.ggml.add_bos_token as llama.cpp
    resolves it; --no-bos would force false). That one flag is passed to llama_tokenize as
    add_special, so BOS is prepended when the model adds BOS (and EOS appended only if the model
    also says add_eos, which none of these models does). The empty string gives [BOS] or [].
  - --stdin rather than -p: arguments cannot carry every text (leading dashes, NULs); --no-escape
    because llama-tokenize processes \\n, \\t, \\\\, \\', \\" escapes by default on -p, -f and
    --stdin alike (params.escape = true), which would alter texts containing backslashes. -f is
    not used either (read verbatim, but escape-processed too). The script checks every text
    against llama-server's POST /tokenize {"content", "add_special": <the model's add_bos>,
    "parse_special": true}, which receives the string through JSON, and fails on any mismatch.
"tokenize_plain": the same with --no-parse-special (special-token text tokenized as plain text).
"greedy": 5 raw prompts (PROMPTS below) and, when the GGUF has tokenizer.chat_template, the same
  5 as a single user message through that template. One llama-server per model
  (-m MODEL -t N -c 2048 -np 1 --port FREE -fa off -ctk f32 -ctv f32, waits for GET /health:
  llama.cpp's most exact settings, K/V in f32 and no flash attention, recorded in
  "greedy_settings"; the tests run Peregrine with the same K/V type). Per prompt:
  - chat: POST /apply-template {"messages": [...], "add_generation_prompt": true} -> "text"
    (llama.cpp's Jinja rendering; when the model adds BOS and the rendered text starts with the
    BOS token text, llama.cpp strips it so that it is not doubled);
  - POST /tokenize {"content": text, "add_special": true, "parse_special": true} ->
    "prompt_tokens" (what /completion itself would evaluate for that text: BOS prepended when
    the model adds BOS, special-token text parsed);
  - POST /completion with the ID LIST as "prompt", n_predict 64, "samplers": ["temperature"],
    temperature 0, n_probs 10, ignore_eos true, cache_prompt false, return_tokens true,
    post_sampling_probs false. The chain is then: logit bias (ignore_eos sets every EOG token to
    -inf; the vocab's suppress tokens, none here) -> temperature 0 (keeps only the first
    maximum logit, lowest id on ties) -> dist (picks that one). So "tokens" is the argmax of the
    raw logits excluding end-of-generation tokens, always exactly 64 ids, and the server
    evaluated exactly "prompt_tokens" (checked: tokens_evaluated == len(prompt_tokens)).
  - "top_logprobs"[i] (every generated position): the 10 best [id, logprob] of the RAW logits at that
    position, best first. With post_sampling_probs false the server (tools/server
    server-context.cpp populate_token_probs -> server-common.cpp get_token_probabilities) takes
    llama_get_logits_ith() of the model output (full vocabulary; backend sampling is forced off
    when pre-sampling probs are requested), partial-sorts by logit, computes
    p = expf(l - max) / sum (float32 sum over the full vocab), and reports logprob = logf(p)
    (server-task.cpp logarithm(); 0 -> FLT_LOWEST). Hence these are log-softmax of the raw
    logits, computed in float32 (~1e-6 relative), before ignore_eos's bias or any sampler: an
    EOG token can appear in the list and even be first, in which case tokens[i] is the best
    non-EOG id (recorded per entry as "eog_top" positions).
  - "completion": the generated text (for human review only).
"greedy_flash_attn": the same prompts through a second llama-server with -fa on (K/V still f32):
  the same function computed in another order of floating-point operations. Per prompt only
  "name", "tokens", "eog_top" and "top_logprobs". How far it lies from "greedy" is llama.cpp's
  own reproducibility on the model (GREEDY_FLASH_FLAGS below).
"perplexity": llama-perplexity -m MODEL -f WIKITEXT -c 512 --chunks 32 -t N -b 512, parsing
  "Final estimate: PPL = X +/- Y"; "running_ppl" are the per-chunk running estimates it prints.
  Exact scoring (tools/perplexity/perplexity.cpp, perplexity(); escape processing is off there):
  1. text = the whole file minus ONE trailing '\\n' (common's -f handler pops it);
     tokens = common_tokenize(text, add_special=true, parse_special=false): one pass over the
     whole file; BOS at tokens[0] iff the model adds BOS.
  2. n_ctx = 512, n_chunk = min(32, len(tokens) // 512). Chunk c is tokens[512c, 512c+512),
     evaluated from an empty KV cache at positions 0..511 in one batch (-b 512: one sequence
     per batch). If the model adds BOS, the FIRST token of every chunk is REPLACED by BOS (the
     chunk is not shifted, the original token at 512c is dropped; for chunk 0 it already is BOS).
     Without add_bos (Qwen) chunks are the raw slices, no BOS anywhere.
  3. first = n_ctx/2 = 256. Scored: logits at positions 256..510 predicting the chunk tokens at
     positions 257..511, i.e. 255 tokens per chunk (n_ctx - 1 - first), 32 * 255 = 8160 in all.
     nll_j = -(logit[tok] - max - log(sum_k expf(logit_k - max))) with float logits, the sum in
     double.
  4. ppl = exp(mean nll); +/- = ppl * sqrt((mean(nll^2) - mean(nll)^2) / (count - 1)).
     Running estimate after chunk c: exp(sum nll / count so far).
"wall_seconds": wall time of each step on the machine that generated the file (2 threads).
"""

import argparse
import hashlib
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "models" / "real_models.tsv"
DEFAULT_TEXTS = REPO / "tests" / "data" / "real_models" / "tokenize_texts.json"
DEFAULT_OUT = REPO / "tests" / "reference" / "llamacpp"
DEFAULT_VERSION = "b10470 34af94cd"

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "Explain what a hash table is.",
    "1, 2, 3, 5, 8, 13,",
]
N_PREDICT = 64
N_PROBS = 10
N_PROB_POSITIONS = 64  # every generated token: the tests compare the first 16, and read the rest at a difference
SERVER_CTX = 2048
# The greedy step runs llama-server twice, with K/V kept in f32 both times: "greedy" without
# flash attention (attention as separate matrix products: llama.cpp's most exact settings; its
# default f16 K/V and flash attention, which also accumulates V·softmax in f16, are further
# off) and "greedy_flash_attn" with it. The two compute the same function in another order of
# floating-point operations, so their difference is llama.cpp's own reproducibility on the
# model: the yardstick the tests hold Peregrine's difference from "greedy" to.
GREEDY_SERVER_FLAGS = ["-fa", "off", "-ctk", "f32", "-ctv", "f32"]
GREEDY_FLASH_FLAGS = ["-fa", "on", "-ctk", "f32", "-ctv", "f32"]
PPL_CTX = 512
PPL_CHUNKS = 32
PPL_BATCH = 512
STEPS = ("tokenize", "greedy", "perplexity")


class RefError(Exception):
    pass


def log(msg):
    print(f"llamacpp_reference: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- manifest, files, GGUF metadata

def read_manifest(path):
    models = {}
    header = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if header is None:
            header = cols
            continue
        row = dict(zip(header, cols))
        models[row["name"]] = row
    return models


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 22)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def gguf_metadata(path, wanted):
    """Returns {key: value} for the scalar/string keys in `wanted` of a GGUF v2/v3 file."""
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}
    out = {}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise RefError(f"{path}: not a GGUF file")
        version, = struct.unpack("<I", f.read(4))
        if version < 2:
            raise RefError(f"{path}: GGUF v{version} not supported")
        _n_tensors, n_kv = struct.unpack("<QQ", f.read(16))

        def read_str():
            n, = struct.unpack("<Q", f.read(8))
            return f.read(n)

        def read_value(t, keep):
            if t in scalar:
                fmt = scalar[t]
                v, = struct.unpack(fmt, f.read(struct.calcsize(fmt)))
                return v
            if t == 8:
                s = read_str()
                return s.decode("utf-8", "replace") if keep else None
            if t == 9:
                et, n = struct.unpack("<IQ", f.read(12))
                if et in scalar:
                    f.seek(n * struct.calcsize(scalar[et]), 1)
                else:
                    for _ in range(n):
                        read_value(et, False)
                return None
            raise RefError(f"{path}: unknown GGUF value type {t}")

        for _ in range(n_kv):
            key = read_str().decode("utf-8", "replace")
            t, = struct.unpack("<I", f.read(4))
            v = read_value(t, key in wanted)
            if key in wanted:
                out[key] = v
    return out


# ---------------------------------------------------------------- JSON output

def _inline(v):
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))


def _scalar(v):
    return not isinstance(v, (list, dict))


def dumps(v, ind=0):
    """Diffable, compact JSON: one object key per line, one id list per line, one
    top_logprobs position ([[id, logprob] x 10]) per line."""
    pad = " " * ind
    if isinstance(v, dict):
        if not v:
            return "{}"
        items = [f"{pad} {json.dumps(k)}: {dumps(x, ind + 1)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(v, list):
        if all(_scalar(x) for x in v) or all(
                isinstance(x, list) and len(x) <= 2 and all(_scalar(y) for y in x) for x in v):
            return _inline(v)
        items = [pad + " " + dumps(x, ind + 1) for x in v]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return _inline(v)


# ---------------------------------------------------------------- llama-tokenize

TOKENIZE_FLAGS = ["--ids", "--log-disable", "--stdin", "--no-escape"]


def run_tokenize(binary, model, text, extra=()):
    p = subprocess.run([str(binary), "-m", str(model), *TOKENIZE_FLAGS, *extra],
                       input=text.encode("utf-8"), capture_output=True, timeout=600)
    if p.returncode != 0:
        raise RefError(f"llama-tokenize failed ({p.returncode}): {p.stderr.decode(errors='replace')[-2000:]}")
    lines = [ln for ln in p.stdout.decode("utf-8", "replace").splitlines() if ln.startswith("[")]
    if len(lines) != 1:
        raise RefError(f"llama-tokenize: unexpected output {p.stdout[-500:]!r}")
    ids = json.loads(lines[0])
    if not all(isinstance(i, int) for i in ids):
        raise RefError(f"llama-tokenize: bad ids {lines[0][:200]}")
    return ids


# ---------------------------------------------------------------- llama-server

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, threads, flags=()):
        self.port = free_port()
        self.args = [str(binary), "-m", str(model), "-t", str(threads), "-c", str(SERVER_CTX),
                     "--host", "127.0.0.1", "--port", str(self.port), "-np", "1", *flags]
        self.log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 600
        while True:
            if self.proc.poll() is not None:
                raise RefError(f"llama-server exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=5) as r:
                    if r.status == 200 and json.load(r).get("status") == "ok":
                        break
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.time() > deadline:
                self.close()
                raise RefError(f"llama-server not healthy after 600 s:\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self):
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def post(self, path, body, timeout=1800):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            raise RefError(f"POST {path}: HTTP {e.code}: {e.read()[:2000]!r}") from None

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        os.unlink(self.log.name)


def f32(x):
    """The shortest decimal that reads back as the same float32 (the server's values are
    float32 printed at double precision)."""
    want = struct.unpack("<f", struct.pack("<f", x))[0]
    for digits in range(6, 10):
        v = float(f"{want:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", v))[0] == want:
            return v
    return want


def greedy_entry(server, name, chat, text, messages):
    prompt_tokens = server.post("/tokenize", {"content": text, "add_special": True,
                                              "parse_special": True})["tokens"]
    body = {
        "prompt": prompt_tokens,
        "n_predict": N_PREDICT,
        "samplers": ["temperature"],
        "temperature": 0.0,
        "n_probs": N_PROBS,
        "ignore_eos": True,
        "cache_prompt": False,
        "return_tokens": True,
        "post_sampling_probs": False,
        "stream": False,
    }
    r = server.post("/completion", body)
    tokens = r["tokens"]
    probs = r.get("completion_probabilities", [])
    if len(tokens) != N_PREDICT or len(probs) != N_PREDICT:
        raise RefError(f"{name}: got {len(tokens)} tokens / {len(probs)} prob entries, want {N_PREDICT}")
    if r.get("tokens_evaluated") != len(prompt_tokens):
        raise RefError(f"{name}: tokens_evaluated {r.get('tokens_evaluated')} != {len(prompt_tokens)}")
    top = []
    eog_top = []
    for i, (tok, p) in enumerate(zip(tokens, probs)):
        if p["id"] != tok:
            raise RefError(f"{name}: position {i}: probs entry id {p['id']} != token {tok}")
        tl = p["top_logprobs"]
        if len(tl) != N_PROBS:
            raise RefError(f"{name}: position {i}: {len(tl)} top_logprobs")
        if tl[0]["id"] != tok:
            # only legitimate when the raw argmax is an EOG token masked by ignore_eos
            eog_top.append(i)
        if i < N_PROB_POSITIONS:
            top.append([[t["id"], f32(t["logprob"])] for t in tl])
    entry = {"name": name, "chat": chat, "text": text}
    if messages is not None:
        entry["messages"] = messages
    entry.update({"prompt_tokens": prompt_tokens, "tokens": tokens, "completion": r["content"],
                  "eog_top": eog_top, "top_logprobs": top})
    return entry


def run_greedy(binary, model, threads, has_template, add_bos, texts, flags):
    server = Server(binary, model, threads, flags)
    try:
        # cross-check llama-tokenize's outputs through a path with no shell/argv involvement
        mismatches = []
        for i, (text, ids) in enumerate(texts):
            got = server.post("/tokenize", {"content": text, "add_special": add_bos,
                                            "parse_special": True})["tokens"]
            if got != ids:
                mismatches.append(i)
        if mismatches:
            raise RefError(f"llama-tokenize and server /tokenize differ on texts {mismatches}")
        entries = []
        for k, p in enumerate(PROMPTS):
            entries.append(greedy_entry(server, f"raw-{k}", False, p, None))
        if has_template:
            for k, p in enumerate(PROMPTS):
                messages = [{"role": "user", "content": p}]
                text = server.post("/apply-template", {"messages": messages,
                                                       "add_generation_prompt": True})["prompt"]
                entries.append(greedy_entry(server, f"chat-{k}", True, text, messages))
        return entries
    finally:
        server.close()


# ---------------------------------------------------------------- llama-perplexity

def run_perplexity(binary, model, wikitext, threads):
    args = [str(binary), "-m", str(model), "-f", str(wikitext), "-c", str(PPL_CTX),
            "--chunks", str(PPL_CHUNKS), "-t", str(threads), "-b", str(PPL_BATCH)]
    p = subprocess.run(args, capture_output=True, timeout=6 * 3600)
    out = p.stdout.decode("utf-8", "replace") + "\n" + p.stderr.decode("utf-8", "replace")
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
    if p.returncode != 0 or not m:
        raise RefError(f"llama-perplexity failed ({p.returncode}):\n{out[-3000:]}")
    running = [float(x) for _, x in re.findall(r"\[(\d+)\]([0-9.]+),", out)]
    if len(running) != PPL_CHUNKS:
        raise RefError(f"llama-perplexity: {len(running)} running estimates, want {PPL_CHUNKS}")
    return {
        "ctx": PPL_CTX, "chunks": PPL_CHUNKS, "batch": PPL_BATCH,
        "ppl": float(m.group(1)), "ppl_stderr": float(m.group(2)),
        "scored_per_chunk": PPL_CTX - 1 - PPL_CTX // 2,
        "scored_total": PPL_CHUNKS * (PPL_CTX - 1 - PPL_CTX // 2),
        "running_ppl": running,
        "wikitext": "wikitext-2/wiki.test.raw",
        "wikitext_sha256": sha256_file(wikitext),
        "command": (f"llama-perplexity -m MODEL -f wiki.test.raw -c {PPL_CTX} --chunks {PPL_CHUNKS}"
                    f" -t {threads} -b {PPL_BATCH}"),
    }


# ---------------------------------------------------------------- main

def build(name, row, args, texts, texts_sha):
    model = args.models_dir / f"{name}.gguf"
    if not model.is_file():
        raise RefError(f"{model} not found (scripts/fetch_models.sh {name})")
    out_path = args.out / f"{name}.json"
    steps = args.steps
    doc = {}
    if set(steps) != set(STEPS):
        if not out_path.is_file():
            raise RefError(f"--steps {','.join(steps)} needs an existing {out_path}")
        doc = json.loads(out_path.read_text(encoding="utf-8"))
    log(f"{name}: checking sha256")
    digest = sha256_file(model)
    if digest != row["sha256"]:
        raise RefError(f"{model}: sha256 {digest} != manifest {row['sha256']}")
    meta = gguf_metadata(model, {"tokenizer.chat_template", "tokenizer.ggml.add_bos_token",
                                 "general.architecture"})
    has_template = bool(meta.get("tokenizer.chat_template"))
    wall = dict(doc.get("wall_seconds", {}))
    t_all = time.time()

    new = {"llamacpp": args.llamacpp_version, "model": name, "sha256": row["sha256"],
           "architecture": meta.get("general.architecture"),
           "has_chat_template": has_template}

    if "tokenize" in steps:
        log(f"{name}: llama-tokenize x {len(texts)}")
        t0 = time.time()
        toks = [run_tokenize(args.bin / "llama-tokenize", model, t) for t in texts]
        plain = [run_tokenize(args.bin / "llama-tokenize", model, t, ["--no-parse-special"]) for t in texts]
        wall["tokenize"] = round(time.time() - t0, 1)
        new.update({"tokenize_flags": TOKENIZE_FLAGS, "tokenize_texts_sha256": texts_sha,
                    "tokenize": toks, "tokenize_plain_flags": TOKENIZE_FLAGS + ["--no-parse-special"],
                    "tokenize_plain": plain})
    else:
        toks = doc["tokenize"]
    # llama-tokenize's add_special (= the model's add_bos): "" tokenizes to [BOS] or []
    add_bos = len(toks[texts.index("")]) > 0
    new["add_bos"] = add_bos

    if "greedy" in steps:
        log(f"{name}: llama-server greedy ({'raw + chat' if has_template else 'raw'})")
        t0 = time.time()
        server = args.bin / "llama-server"
        entries = run_greedy(server, model, args.threads, has_template, add_bos, list(zip(texts, toks)),
                             GREEDY_SERVER_FLAGS)
        flash = run_greedy(server, model, args.threads, has_template, add_bos, list(zip(texts, toks)),
                           GREEDY_FLASH_FLAGS)
        for e, f in zip(entries, flash):
            if f["prompt_tokens"] != e["prompt_tokens"]:
                raise RefError(f"{name} {e['name']}: the two servers tokenized the prompt differently")
        wall["greedy"] = round(time.time() - t0, 1)
        server_args = f"llama-server -m MODEL -t {args.threads} -c {SERVER_CTX} -np 1 --port PORT "
        new["greedy_settings"] = {
            "server": server_args + " ".join(GREEDY_SERVER_FLAGS),
            "flash_attn_server": server_args + " ".join(GREEDY_FLASH_FLAGS),
            "kv_type": "f32",
            "completion": {"n_predict": N_PREDICT, "samplers": ["temperature"], "temperature": 0,
                           "n_probs": N_PROBS, "ignore_eos": True, "cache_prompt": False,
                           "post_sampling_probs": False},
            "top_logprobs_positions": N_PROB_POSITIONS,
        }
        new["greedy"] = entries
        new["greedy_flash_attn"] = [{k: f[k] for k in ("name", "tokens", "eog_top", "top_logprobs")} for f in flash]

    if "perplexity" in steps:
        log(f"{name}: llama-perplexity ({PPL_CHUNKS} x {PPL_CTX})")
        t0 = time.time()
        new["perplexity"] = run_perplexity(args.bin / "llama-perplexity", model, args.wikitext,
                                           args.threads)
        wall["perplexity"] = round(time.time() - t0, 1)
        log(f"{name}: PPL = {new['perplexity']['ppl']} +/- {new['perplexity']['ppl_stderr']}")

    wall["total_this_run"] = round(time.time() - t_all, 1)
    order = ["llamacpp", "model", "sha256", "architecture", "has_chat_template", "add_bos",
             "tokenize_flags", "tokenize_texts_sha256", "tokenize", "greedy_settings", "greedy", "greedy_flash_attn",
             "perplexity"]
    merged = dict(doc)
    merged.update(new)
    merged["wall_seconds"] = wall
    final = {k: merged[k] for k in order if k in merged}
    final.update({k: v for k, v in merged.items() if k not in final})
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".json.tmp")
    tmp.write_text(dumps(final) + "\n", encoding="utf-8")
    os.replace(tmp, out_path)
    log(f"{name}: wrote {out_path} ({out_path.stat().st_size} bytes), wall {wall}")


def main():
    shared = Path(os.environ.get("PEREGRINE_SHARED_DIR", REPO.parent / "shared"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=Path, required=True, help="llama.cpp binaries' directory")
    ap.add_argument("--models-dir", type=Path,
                    default=Path(os.environ.get("PEREGRINE_MODEL_CACHE", REPO / "models" / "cache")))
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--texts", type=Path, default=DEFAULT_TEXTS)
    ap.add_argument("--wikitext", type=Path, default=shared / "data" / "wikitext-2" / "wiki.test.raw")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llamacpp-version", default=DEFAULT_VERSION)
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    args.steps = [s for s in args.steps.split(",") if s]
    try:
        bad = [s for s in args.steps if s not in STEPS]
        if bad:
            raise RefError(f"unknown steps {bad}")
        for b in ("llama-tokenize", "llama-server", "llama-perplexity"):
            if not os.access(args.bin / b, os.X_OK):
                raise RefError(f"{args.bin / b} not found or not executable")
        if "perplexity" in args.steps and not args.wikitext.is_file():
            raise RefError(f"{args.wikitext} not found (--wikitext)")
        manifest = read_manifest(MANIFEST)
        names = args.names or list(manifest)
        unknown = [n for n in names if n not in manifest]
        if unknown:
            raise RefError(f"not in {MANIFEST.name}: {unknown}")
        raw = args.texts.read_bytes()
        texts = json.loads(raw)
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or "" not in texts:
            raise RefError(f"{args.texts}: want a JSON array of strings including \"\"")
        texts_sha = hashlib.sha256(raw).hexdigest()
        for name in names:
            build(name, manifest[name], args, texts, texts_sha)
    except RefError as e:
        print(f"llamacpp_reference: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
