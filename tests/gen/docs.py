#!/usr/bin/env python3
"""Checks that the documentation holds together (run by tests/gen/run.sh, from the repo root):

1. Examples are the tested files: each code block after `<!-- example: PATH -->` in README.md
   or docs/*.md must be PATH byte for byte, so the docs show code the suites compile and run.
2. Links resolve: every relative link in README.md, BENCHMARKS.md, docs/ and the other
   Markdown files names a file that exists and, with `#anchor`, a heading of that file.
3. The design the code cites is in the repository: a comment cites a rule as
   `docs/FILE.md, "Heading"`, and that heading must exist; a section sign or a citation of a
   design document outside the repository fails, and so does a comment that cites an issue
   number instead of saying what it means.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(".")
SKIP_DIRS = {"node_modules", "target", ".tools", ".git", "dist", "__pycache__"}
CODE_SUFFIXES = {".rs", ".ts", ".tsx", ".go", ".py", ".sh", ".mjs", ".proto"}
failures = []


def files(suffixes):
    for path in sorted(ROOT.rglob("*")):
        if path.suffix in suffixes and not SKIP_DIRS.intersection(path.parts) and path.is_file():
            yield path


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(md):
    """Every heading anchor of a Markdown file (outside code blocks), duplicates numbered."""
    seen, fence = {}, False
    for line in md.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            yield base if n == 0 else f"{base}-{n}"


def prose(md):
    """The lines of a Markdown file outside code blocks, with their numbers."""
    fence = False
    for number, line in enumerate(md.read_text().splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            yield number, line


# 1. Examples.
docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
examples = 0
for md in docs:
    for path, code in re.findall(r"<!-- example: (\S+) -->\n```[a-z]*\n(.*?)\n```", md.read_text(), re.S):
        examples += 1
        if pathlib.Path(path).read_text().rstrip("\n") != code:
            failures.append(f"{md}: the example differs from {path}: copy the file into it")
if examples == 0:
    failures.append("no `<!-- example: PATH -->` block in README.md or docs/")
print(f"{examples} examples in README.md and docs/ checked against their files")

# 2. Links.
links = 0
for md in files({".md"}):
    for number, line in prose(md):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            links += 1
            path, _, anchor = target.partition("#")
            dest = (md.parent / path) if path else md
            if not dest.exists():
                failures.append(f"{md}:{number}: link to {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in set(anchors(dest)):
                failures.append(f"{md}:{number}: link to {target}: no such heading in {dest}")
print(f"{links} relative links checked")

# 3. Citations in code comments.
section_sign, outside = "\u00a7", "DESIGN" + r"\b"
comment = re.compile(r"^\s*(//|#|\*|/\*|\"\"\"|\S.*\s(//|#)\s)")
cites = 0
this = pathlib.Path(__file__).resolve()
for path in files(CODE_SUFFIXES):
    if path.resolve() == this:
        continue
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        for doc, heading in re.findall(r"(docs/[\w.-]+\.md), \"([^\"]+)\"", line):
            cites += 1
            if not (ROOT / doc).exists():
                failures.append(f"{path}:{number}: cites {doc}, which does not exist")
            elif slug(heading) not in set(anchors(ROOT / doc)):
                failures.append(f"{path}:{number}: cites \"{heading}\", no such heading in {doc}")
        if section_sign in line or re.search(outside, line):
            failures.append(f"{path}:{number}: cites a design outside docs/: {line.strip()}")
        if comment.match(line) and re.search(r"[Ii]ssue #?[0-9]+", line):
            failures.append(f"{path}:{number}: a comment cites an issue number: {line.strip()}")
print(f"{cites} citations of docs/ in code checked")

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
