#!/usr/bin/env python3
"""Checks that dependencies point down (ARCHITECTURE.md): no file of a low layer includes a
header of a higher one.

Usage: tools/check_layers.py [ROOT]     (default: the repository this script is in)
       tools/check_layers.py --self-test

Reads every #include "peregrine/..." line of the files under include/peregrine/<folder> and
src/<folder> for the folders in RULES, and prints each include outside what the folder may
use. Exit status: 0 when there is none, 1 when there is (one line per include: file:line: what),
2 on bad usage. --self-test plants an upward include in a temporary tree and checks that it is
reported, and that a permitted one is not.
"""
import pathlib
import re
import sys
import tempfile

# Folder (under include/peregrine/ and src/) -> the header prefixes (under include/peregrine/)
# its files may include. Lowest first: core, then the kernels' inputs (quant's block formats,
# the KV cache's views), the kernels, and the model's spec, which the file readers fill.
RULES = {
    "core": ("core/",),
    "kv": ("core/", "quant/", "kv/"),
    "kernels": ("core/", "quant/", "kv/", "kernels/"),
    "model/spec": ("core/", "kv/kv_shape.h", "model/spec/"),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"peregrine/([^"]+)"')
SOURCES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def violations(root: pathlib.Path):
    """(file, line number, included header) for every include a folder may not use."""
    found = []
    for folder, allowed in RULES.items():
        for base in (root / "include" / "peregrine" / folder, root / "src" / folder):
            for path in sorted(base.rglob("*")) if base.is_dir() else []:
                if path.suffix not in SOURCES:
                    continue
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    match = INCLUDE.match(line)
                    if match and not match.group(1).startswith(allowed):
                        found.append((path.relative_to(root), number, match.group(1)))
    return found


def report(root: pathlib.Path) -> int:
    found = violations(root)
    for path, number, header in found:
        print(f"{path}:{number}: includes peregrine/{header}, above its layer (tools/check_layers.py RULES)")
    if found:
        print(f"check_layers: {len(found)} upward include(s)")
        return 1
    print(f"check_layers: dependencies point down ({', '.join(RULES)} checked)")
    return 0


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        kernel = root / "include" / "peregrine" / "kernels" / "cpu" / "k.h"
        kernel.parent.mkdir(parents=True)
        kernel.write_text('#include "peregrine/core/tensor.h"\n#include "peregrine/kv/kv_layer_view.h"\n')
        if violations(root):
            print("check_layers --self-test: permitted includes were reported")
            return 1
        planted = root / "src" / "kv" / "kv.cpp"
        planted.parent.mkdir(parents=True)
        planted.write_text('#include "peregrine/kv/kv_cache.h"\n  #include "peregrine/formats/model_file.h"\n')
        want = [(pathlib.Path("src/kv/kv.cpp"), 2, "formats/model_file.h")]
        if violations(root) != want:
            print(f"check_layers --self-test: the planted upward include gave {violations(root)}, not {want}")
            return 1
    print("check_layers --self-test: a planted upward include is reported, permitted ones are not")
    return 0


def main(argv) -> int:
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[0]) if argv else pathlib.Path(__file__).resolve().parent.parent
    return report(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
