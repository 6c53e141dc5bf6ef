"""A pytest plugin for running llama.cpp's server tests against Peregrine
(tools/llamacpp_server_suite.sh loads it with -p).

- The suite's session fixture starts every model preset once to fill its download cache; the
  hub is not reachable here, so that step is skipped (each test still starts its own server).
- A request to one of llama-server's own endpoints (LLAMA_SERVER_ONLY: its native /completion
  API, slots, props, infill, rerank, router, web UI, ...) raises LlamaServerOnly instead of being
  sent; a download (a draft model, a LoRA adapter from the hub) raises NotOffline.
- Each test's outcome is classified and appended as one JSON line to $SUITE_RESULTS:
  passed, failed, skipped, "llama-server only" (a test that failed after reaching one of those
  endpoints, or whose server the shim refused to start for a llama-server-only flag: exit status
  4, tools/llama_server_shim.py) or "no model" (a failed download, or the shim's exit status 3: a
  model only the hub has).
"""
import json
import os
import re


# Paths (regular expressions, matched whole) of llama-server's own API and web UI, outside the
# OpenAI and Anthropic surface Peregrine answers (its /completions and /embeddings without /v1 are
# its native API, not OpenAI's).
LLAMA_SERVER_ONLY = re.compile(
    r"/(|completions?|embeddings|infill|props|slots(/.*)?|v1/rerank|rerank|reranking|apply-template|lora-adapters|tools"
    r"|predict|models/(load|unload)|cors-proxy.*|v1/stream.*|chat/completions/input_tokens|sw\.js|manifest\.webmanifest"
    r"|_app/.*)(\?.*)?")


class LlamaServerOnly(Exception):
    pass


class NotOffline(Exception):
    pass


_touched = set()  # what the running test reached that does not apply: "llama-server only", "no model"


def pytest_sessionstart(session):
    import utils  # the suite's own helpers (its tests folder is on sys.path)

    utils.ServerPreset.load_all = staticmethod(lambda: None)
    os.makedirs("tmp", exist_ok=True)  # the suite's download cache (LLAMA_CACHE), which load_all made
    send, send_stream = utils.ServerProcess.make_request, utils.ServerProcess.make_stream_request

    def check(method, path):
        if method != "OPTIONS" and LLAMA_SERVER_ONLY.fullmatch(path):  # a CORS preflight is answered on any path
            _touched.add("llama-server only")  # seen even when a worker thread swallows the exception
            raise LlamaServerOnly(f"{method} {path} is llama-server's own endpoint")

    def download_file(url, output_file_path=None):
        _touched.add("no model")
        raise NotOffline(f"{url}: the hub is not reachable here")

    utils.download_file = download_file

    def make_request(self, method, path, *args, **kwargs):
        check(method, path)
        return send(self, method, path, *args, **kwargs)

    def make_stream_request(self, method, path, *args, **kwargs):
        check(method, path)
        yield from send_stream(self, method, path, *args, **kwargs)

    utils.ServerProcess.make_request = make_request
    utils.ServerProcess.make_stream_request = make_stream_request


def pytest_runtest_setup(item):
    _touched.clear()


def _outcome(report):
    if report.passed:
        return "passed"
    if report.skipped:
        return "skipped"
    for reached in ("llama-server only", "no model"):
        if reached in _touched:
            return reached
    died = re.search(r"Server process died with return code (\d+)", str(report.longrepr))
    return {"3": "no model", "4": "llama-server only"}.get(died.group(1) if died else "", "failed")


def pytest_runtest_logreport(report):
    # One outcome per test: its call, or the setup / teardown that failed or skipped it.
    if report.when != "call" and report.passed:
        return
    path = os.environ.get("SUITE_RESULTS")
    if not path:
        return
    with open(path, "a") as out:
        out.write(json.dumps({"test": report.nodeid, "outcome": _outcome(report)}) + "\n")
