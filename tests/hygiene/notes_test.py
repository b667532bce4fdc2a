#!/usr/bin/env python3
"""Notes are defined exactly once and referenced as `See Note [X]`.

A definition is a comment (or docstring) line whose text starts with `Note [...]:`, optionally as a
list item (`// - Note [...]: ...`); every other mention is a reference and must read `see Note [X]`
(either case), so a reader can tell the two apart. A name may wrap onto the next comment line. The
test fails, naming file and line, on a reference to a note no file defines, a note defined twice,
and a reference not written `see Note [X]`.
Usage: notes_test.py SOURCE_DIR
"""
import collections
import re
import subprocess
import sys

SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".py", ".sh", ".cmake", ".md", ".json", ".txt")
DEFINITION = re.compile(r"^\s*(?://+|#+|\*)?\s*(?:- )?Note \[")
COMMENT_LEAD = re.compile(r"^\s*(?://+|#+|\*|\")?\s*")
SEE_BEFORE = re.compile(r"(?i)\bsee\s+$")


def name_at(lines, n, start):
    """The note name whose `[` is at lines[n][start]; a name may continue on the next line."""
    text = lines[n][start + 1:]
    if "]" not in text and n + 1 < len(lines):
        text = text.rstrip(' "') + " " + COMMENT_LEAD.sub("", lines[n + 1], count=1)
    return " ".join(text.split("]", 1)[0].split()) if "]" in text else None


def main(root):
    files = subprocess.check_output(["git", "-C", root, "ls-files"], text=True).split()
    defs, refs = collections.defaultdict(list), collections.defaultdict(list)
    unmarked = []
    for f in files:
        if not f.endswith(SUFFIXES) or f.startswith("tests/mutants/") or f == "tests/hygiene/notes_test.py":
            continue
        try:
            lines = open(f"{root}/{f}", encoding="utf-8").read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for n, line in enumerate(lines):
            for m in re.finditer(r"Note \[", line):
                name, where = name_at(lines, n, m.end() - 1), f"{f}:{n + 1}"
                if name is None or set(name) == {"."}:  # "Note [...]" names the convention itself
                    continue
                if m.start() == line.index("Note [") and DEFINITION.match(line) and \
                        line[m.end():].split("]", 1)[-1].startswith(":") or \
                        m.start() == line.index("Note [") and DEFINITION.match(line) and "]" not in line[m.end():] and \
                        n + 1 < len(lines) and re.match(r"^[^\]]*\]:", COMMENT_LEAD.sub("", lines[n + 1], count=1)):
                    defs[name].append(where)
                    continue
                refs[name].append(where)
                before = line[:m.start()]
                if SEE_BEFORE.search(before):
                    continue
                if not COMMENT_LEAD.sub("", before, count=1) and n > 0 and re.search(r"(?i)\bsee\s*\"?$", lines[n - 1]):
                    continue
                unmarked.append(f"{where}: Note [{name}]")
    bad = 0
    for name, places in sorted(refs.items()):
        if name not in defs:
            bad += 1
            print(f"FAIL: note '{name}' is referenced ({', '.join(places[:3])}) but defined nowhere")
    for name, places in sorted(defs.items()):
        if len(places) > 1:
            bad += 1
            print(f"FAIL: note '{name}' is defined {len(places)} times: {', '.join(places)}")
    for u in unmarked:
        bad += 1
        print(f"FAIL: {u} is a reference not written 'see Note [...]'")
    print(f"{len(defs)} notes defined, {sum(map(len, refs.values()))} references, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
