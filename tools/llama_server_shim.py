#!/usr/bin/env python3
"""llama-server's command line, run as `peregrine serve`: lets llama.cpp's server test suite
(tools/server/tests, which starts `$LLAMA_SERVER_BIN_PATH` with llama-server's flags per test)
drive Peregrine's server with each test's own configuration. Standard library only.

Every flag llama-server's tests pass is either translated (model, context, slots, sampling
defaults, templates, API key, ...), ignored because Peregrine always behaves that way
(continuous batching, /metrics, Jinja templates, embeddings, no GPU layers), or refused with one
line on stderr and exit status 4 (a llama-server-only feature: context shift, /slots, router
mode, LoRA at start, ...), so the test reports the server as failing to start. A context longer
than the model's trained one (llama-server runs it, Peregrine refuses it) is cut to that length.

Models named by Hugging Face repository are looked up offline: ggml-org/test-model-stories260K is
the bundled models/stories260K/stories260K.gguf; any other repository must be a file in
$PEREGRINE_SHIM_MODELS (default models/cache) named as the repository's file, else exit 3.

Environment: PEREGRINE_BIN (default build/bin/peregrine of this checkout).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Hugging Face repositories the tests name → files of this checkout.
HF_MODELS = {
    "ggml-org/test-model-stories260K": os.path.join(ROOT, "models", "stories260K", "stories260K.gguf"),
}

# Flags Peregrine's server needs no equivalent of: (flag, takes a value).
IGNORED = {
    "--cont-batching": False, "--metrics": False, "--no-slots": False, "--jinja": False, "--no-jinja": False,
    "--embedding": False, "--no-ui": False, "--offline": False, "--verbose": False,
    "--n-gpu-layers": True, "--batch-size": True, "--ubatch-size": True, "-fa": True,
}
# llama-server's own features Peregrine does not have.
REFUSED = {
    "--slots", "--context-shift", "--grp-attn-n", "--grp-attn-w", "--slot-save-path", "--lora",
    "--models-dir", "--models-max", "--models-preset", "--no-models-autoload", "--model-url",
    "--mmproj-url", "--no-mmproj", "--media-path", "--sleep-idle-seconds", "--cache-ram",
    "--no-cache-idle-slots", "--ui-mcp-proxy", "--tools", "--tools-runtime", "--mcp-servers-config",
    "--mcp-servers-json", "--backend_sampling", "--cors-origins", "--reranking", "--tags", "--reasoning",
}
# llama-server's built-in template names → Peregrine's.
TEMPLATES = {"chatml": "chatml", "llama2": "llama-2", "llama3": "llama-3"}
KV_TYPES = {"f32", "f16", "q8_0"}


NO_MODEL, NOT_APPLICABLE = 3, 4  # exit statuses (tools/llamacpp_server_suite.sh counts them)


def refuse(message, status=NOT_APPLICABLE):
    sys.stderr.write(f"llama_server_shim: {message}\n")
    sys.exit(status)


def model_file(repo, file):
    name = repo.split(":")[0]
    if name in HF_MODELS and not file:
        return HF_MODELS[name]
    cache = os.environ.get("PEREGRINE_SHIM_MODELS", os.path.join(ROOT, "models", "cache"))
    local = os.path.join(cache, os.path.basename(file)) if file else ""
    if local and os.path.isfile(local):
        return local
    refuse(f"model {repo}{'/' + file if file else ''} is not available offline", NO_MODEL)


def trained_context(binary, model):
    """The model's context length (`peregrine inspect`): llama-server runs a longer context than
    the model was trained for, Peregrine refuses one, so the shim asks for at most this."""
    shown = subprocess.run([binary, "inspect", "-m", model], capture_output=True, text=True).stdout
    found = re.search(r"context (\d+)", shown)
    return int(found.group(1)) if found else 1 << 30


def translate(argv, binary):
    """llama-server's argv (without the program) → `peregrine serve` arguments."""
    values, i = {}, 0
    while i < len(argv):
        flag = argv[i]
        if flag in REFUSED:
            refuse(f"{flag} is a llama-server feature Peregrine does not have")
        if flag in IGNORED:
            i += 2 if IGNORED[flag] else 1
            continue
        if i + 1 >= len(argv):
            refuse(f"{flag}: unknown flag or missing value")
        values[flag] = argv[i + 1]
        i += 2
    out = ["serve"]
    take = lambda flag: values.pop(flag, None)  # noqa: E731
    model, repo, hf_file = take("--model"), take("--hf-repo"), take("--hf-file")
    if repo:
        model = model_file(repo, hf_file)
    if not model:
        refuse("no model: llama-server's router mode (models loaded on demand) is its own feature")
    if model:
        out += ["-m", model]
    slots = int(take("--parallel") or 1)
    out += ["--parallel", str(slots)]
    ctx = take("--ctx-size")
    if ctx:  # llama-server splits its context among the slots
        per_slot = min(int(ctx) // slots, trained_context(binary, model))
        out += ["--ctx", str(per_slot), "--ctx-total", str(per_slot * slots)]
    n_predict = take("--n-predict")
    if n_predict and int(n_predict) > 0:  # -1: llama-server's "no limit", Peregrine's default
        out += ["--n-predict", n_predict]
    for flag, ours in (("--host", "--host"), ("--port", "--port"), ("--alias", "--alias"), ("--threads", "-t"),
                       ("--api-key", "--api-key"), ("--temp", "--temp"), ("--seed", "--seed"),
                       ("--chat-template-file", "--chat-template")):
        value = take(flag)
        if value is not None:
            out += [ours, value]
    template = take("--chat-template")
    if template:
        out += ["--chat-template", TEMPLATES.get(template) or refuse(f"chat template {template} is not built in")]
    reasoning = take("--reasoning-format")
    if reasoning:
        out += ["--reasoning-format", {"deepseek": "auto", "none": "none"}.get(reasoning) or
                refuse(f"--reasoning-format {reasoning}")]
    pooling = take("--pooling")
    if pooling:
        out += ["--pooling", pooling if pooling in ("last", "mean", "cls") else refuse(f"--pooling {pooling}")]
    for flag in ("-ctk", "-ctv"):
        kv = take(flag)
        if kv:
            out += ["--kv-type", kv if kv in KV_TYPES else refuse(f"{flag} {kv}")]
    draft = take("--model-draft")
    if draft:
        out += ["--spec", "draft", "--draft-model", draft]
    n_max = take("--spec-draft-n-max")
    if n_max:
        out += ["--draft-max", n_max]
    take("--spec-draft-n-min")
    if values:
        refuse(f"unknown llama-server flag(s): {' '.join(values)}")
    return out


def main():
    binary = os.environ.get("PEREGRINE_BIN", os.path.join(ROOT, "build", "bin", "peregrine"))
    args = translate(sys.argv[1:], binary)
    sys.stderr.write(f"llama_server_shim: {binary} {' '.join(args)}\n")
    os.execv(binary, [binary, *args])


if __name__ == "__main__":
    main()
