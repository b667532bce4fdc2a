#!/usr/bin/env python3
"""Every `Note [...]` the tree mentions is defined exactly once.

A definition is a comment (or docstring) line whose text starts with `Note [...]:`, optionally as a
list item (`// - Note [...]: ...`); every other mention is a reference. A reference to a note that no
file defines, or a note defined twice, is reported with its file and line, and the test fails.
Usage: notes_test.py SOURCE_DIR
"""
import collections
import re
import subprocess
import sys

SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".py", ".sh", ".cmake", ".md", ".json", ".txt")
NOTE = re.compile(r"Note \[([^\]]+)\]")
DEFINITION = re.compile(r"^\s*(?://+|#+|\*)?\s*(?:- )?Note \[([^\]]+)\]:")


def main(root):
    files = subprocess.check_output(["git", "-C", root, "ls-files"], text=True).split()
    defs, refs = collections.defaultdict(list), collections.defaultdict(list)
    for f in files:
        if not f.endswith(SUFFIXES) or f.startswith("tests/mutants/"):
            continue
        try:
            lines = open(f"{root}/{f}", encoding="utf-8").read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for n, line in enumerate(lines, 1):
            d = DEFINITION.match(line)
            for m in NOTE.finditer(line):
                where = f"{f}:{n}"
                if d and m.start() == line.index("Note ["):
                    defs[m.group(1)].append(where)
                else:
                    refs[m.group(1)].append(where)
    bad = 0
    for name, places in sorted(refs.items()):
        if name not in defs and set(name) != {"."}:  # "Note [...]" names the convention itself
            bad += 1
            print(f"FAIL: note '{name}' is referenced ({', '.join(places[:3])}) but defined nowhere")
    for name, places in sorted(defs.items()):
        if len(places) > 1:
            bad += 1
            print(f"FAIL: note '{name}' is defined {len(places)} times: {', '.join(places)}")
    print(f"{len(defs)} notes defined, {sum(map(len, refs.values()))} references, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
