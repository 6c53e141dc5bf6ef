"""`peregrine serve` as a child process for the Python server tests (the official clients'
view of the server), and the error helper they share."""

import os
import re
import subprocess
import sys
import threading


class Server:
    """`command` (`peregrine serve ...`) on a free port; `url` is its base URL once it is
    listening. stop() sends SIGTERM and requires exit code 0."""

    def __init__(self, command, start_timeout=60):
        self.proc = subprocess.Popen(
            list(command) + ["--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        listening = threading.Event()
        found = {}

        def read_stderr():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on (http://\S+)", line)
                if m and not listening.is_set():
                    found["url"] = m.group(1)
                    listening.set()

        threading.Thread(target=read_stderr, daemon=True).start()
        if not listening.wait(start_timeout):
            self.proc.kill()
            raise RuntimeError(f"serve did not start in {start_timeout} s:\n" + "".join(self.log))
        self.url = found["url"]

    def stop(self):
        self.proc.terminate()
        code = self.proc.wait(60)
        assert code == 0, f"serve did not exit 0 on SIGTERM ({code}):\n" + "".join(self.log)


def expect_error(cls, call):
    """The exception of class `cls` that `call()` raises (an AssertionError when none)."""
    try:
        call()
    except cls as err:
        return err
    raise AssertionError(f"expected {cls.__name__}")


def require_real_model(model, name):
    """Returns when the real model file `model` (manifest name `name`) exists. When it is missing:
    exits 1 if $PEREGRINE_REQUIRE_REAL_MODELS lists it (or is "all"), else 77 (ctest's skip code
    for these tests)."""
    if not os.path.exists(model):
        required = os.environ.get("PEREGRINE_REQUIRE_REAL_MODELS", "")
        if required == "all" or name in required.split(","):
            sys.exit(f"{model} is missing but required: run scripts/fetch_models.sh {name}")
        print(f"{model} not fetched: skipped")
        sys.exit(77)


def serve_real_model(binary, model, name, extra=()):
    """A Server of the real model file `model` (manifest name `name`, ctx 2048, `extra` serve
    flags), after require_real_model."""
    require_real_model(model, name)
    return Server([binary, "serve", "-m", model, "--ctx", "2048", *extra])
