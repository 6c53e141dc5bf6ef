"""`peregrine serve` as a child process for the Python server tests (the official clients'
view of the server), and the error helper they share."""

import re
import subprocess
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
