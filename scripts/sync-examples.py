#!/usr/bin/env python3
"""Copies the Swift examples of README.md and the DocC articles into Examples/, where the
package builds each as a program and DocumentationTests runs it.

In a document, `<!-- example: NAME -->` on the line before a ```swift block makes the block
part of the program NAME; a program is its blocks in the order the documents give them,
a blank line between two. Examples/NAME/main.swift is written from them, after one header
line. Edit the documents, then run this; `--check` only reports programs that differ (the
tests do the same comparison).

    python3 scripts/sync-examples.py [--check]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADER = "// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.\n"
MARKER = re.compile(r"^<!-- example: ([A-Za-z0-9]+) -->\s*$")


def documents():
    yield ROOT / "README.md"
    yield from sorted(ROOT.glob("Sources/*/*.docc/*.md"))


def programs():
    """NAME -> the text of its blocks, in document order."""
    found = {}
    for path in documents():
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            match = MARKER.match(lines[i])
            if match:
                if i + 1 >= len(lines) or lines[i + 1].strip() != "```swift":
                    sys.exit(f"{path.relative_to(ROOT)}:{i + 1}: an example marker must come right before ```swift")
                end = i + 2
                while end < len(lines) and lines[end].strip() != "```":
                    end += 1
                found.setdefault(match.group(1), []).append("\n".join(lines[i + 2 : end]) + "\n")
                i = end
            i += 1
    return {name: HEADER + "\n".join(blocks) for name, blocks in found.items()}


def main():
    check = "--check" in sys.argv[1:]
    different = []
    for name, text in sorted(programs().items()):
        target = ROOT / "Examples" / name / "main.swift"
        if target.exists() and target.read_text() == text:
            continue
        different.append(name)
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    if check and different:
        sys.exit("examples out of date: " + ", ".join(different) + " (run python3 scripts/sync-examples.py)")
    for name in different:
        print(f"wrote Examples/{name}/main.swift")


if __name__ == "__main__":
    main()
