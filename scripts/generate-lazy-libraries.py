#!/usr/bin/env python3
"""generate-lazy-libraries.py: the one way a C target opens its library at run time.

    python3 scripts/generate-lazy-libraries.py          # writes Sources/<target>/lazy.c for each below
    python3 scripts/generate-lazy-libraries.py --check  # exits 1 when they are out of date

RasterImage calls libheif's and libavif's functions by their own names. Instead of
linking the libraries (and, through them, the HEVC and AV1 codecs and abseil: 30 of
the 53 libraries the binary mapped at start, whatever it was asked to do), each target
defines those functions itself: every definition calls the library's function through
a pointer that `<target>_open` fills, with dlopen and dlsym, the first time a HEIF or
AVIF image is met. A JPEG or PNG job maps none of them.

The definitions are written from the library's own header (or, for librsvg, which
Debian ships without one, the target's declarations of what it calls), by clang's AST
(`-ast-dump=json`), for the functions RasterImage's Swift files and the target's own C
call: a call of a new function fails to link until this script is run again. Each
target's `<target>_load_library(&error)` says why a library cannot be used (not
installed, or a version without a function called), and Swift turns that into a typed
error.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LIBRARIES = [
    # (target, the headers as #include names them, soname, Debian package, pattern of the
    # library's function names, clang's include folders)
    ("CHEIF", ["<libheif/heif.h>"], "libheif.so.1", "libheif1", r"\bheif_[A-Za-z0-9_]+(?=\()", []),
    ("CAVIF", ["<avif/avif.h>"], "libavif.so.15", "libavif15", r"\bavif[A-Z][A-Za-z0-9]*(?=\()", []),
    ("CTIFF", ["<tiffio.h>"], "libtiff.so.6", "libtiff6", r"\bTIFF[A-Z][A-Za-z0-9]*(?=\()", []),
    ("CJXL", ["<jxl/decode.h>", "<jxl/encode.h>"], "libjxl.so.0.7", "libjxl0.7", r"\bJxl[A-Z][A-Za-z0-9]*(?=\()",
     []),
    ("CSVG", ['"librsvg.h"'], "librsvg-2.so.2", "librsvg2-2",
     r"\b(?:rsvg_handle|cairo|g_object|g_error)_[a-z_]+(?=\()", ["Sources/CSVG"]),
    ("CFreeType", ["<ft2build.h>", "FT_FREETYPE_H"], "libfreetype.so.6", "libfreetype6",
     r"\bFT_[A-Z][A-Za-z_]*(?=\()", ["/usr/include/freetype2"]),
]

# Functions taking variable arguments cannot be forwarded as they are: each is defined
# through the library's own va_list form.
VARIADIC = {"TIFFGetField": "TIFFVGetField", "TIFFGetFieldDefaulted": "TIFFVGetFieldDefaulted",
            "TIFFSetField": "TIFFVSetField"}


def called_names(target, pattern):
    """The names RasterImage's Swift files and the target's own shim call."""
    names = set()
    folders = [os.path.join(ROOT, "Sources", "RasterImage"), os.path.join(ROOT, "Sources", target)]
    for top in folders:
        for folder, _, files in os.walk(top):
            for name in files:
                if name.endswith(".swift") or (name.endswith(".c") and name != "lazy.c"):
                    with open(os.path.join(folder, name), encoding="utf-8") as f:
                        names.update(re.findall(pattern, f.read()))
    return names


def declarations(headers, folders):
    """The headers' function declarations: name -> (return type, [(type, name)], variadic)."""
    source = "".join(f"#include {name}\n" for name in headers)
    flags = [f"-I{os.path.join(ROOT, folder)}" for folder in folders]
    out = subprocess.run(
        ["clang", "-x", "c", "-fsyntax-only", *flags, "-Xclang", "-ast-dump=json", "-"],
        input=source.encode(), capture_output=True, check=True).stdout
    found = {}

    def visit(node):
        if node.get("kind") == "FunctionDecl" and "name" in node:
            qual = node["type"]["qualType"]
            params = [
                (p["type"]["qualType"], p.get("name", f"a{i}"))
                for i, p in enumerate(n for n in node.get("inner", []) if n.get("kind") == "ParmVarDecl")
            ]
            found[node["name"]] = (qual[: qual.index("(")].strip(), params, node["type"].get("variadic", False)
                                   or qual.endswith("...)"))
        for child in node.get("inner", []):
            visit(child)

    visit(json.loads(out))
    return found


def declarator(ctype, name):
    """`ctype` with `name` in it: after `(*` for a function pointer, else after the type."""
    if "(*)" in ctype:
        return ctype.replace("(*)", f"(*{name})", 1)
    if ctype.endswith("]"):
        at = ctype.index("[")
        return f"{ctype[:at].rstrip()} {name}{ctype[at:]}"
    return f"{ctype} {name}"


def generate(target, headers, soname, package, pattern, folders):
    known = declarations(headers, folders)
    # Names that are not functions of the header are its structs, made in Swift
    # (`heif_error(...)`); a function the header lacks fails to link.
    names = sorted(n for n in called_names(target, pattern) if n in known)
    pointers = sorted(set(VARIADIC.get(n, n) for n in names))
    prefix = target.lower()
    lines = [
        f"// Generated by scripts/generate-lazy-libraries.py from {', '.join(headers)}: do not edit.",
        f"// {soname} is opened when {prefix}_load_library is first called; each function called through",
        "// this target is defined here and calls the library's through the pointer dlsym found.",
        f'#include "{target}.h"',
        *(f"#include {name}" for name in headers),
        "#include <dlfcn.h>",
        "#include <pthread.h>",
        "#include <stdarg.h>",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "",
        "static struct {",
    ]
    for name in pointers:
        lines.append(f"    __typeof__({name}) *{name};")
    lines += [
        "} functions;",
        "",
        "static pthread_once_t once = PTHREAD_ONCE_INIT;",
        "static int opened;",
        "static char failure[512];",
        "",
        "static void open_library(void) {",
        f'    const char *path = getenv("IMAGELOADER_{target[1:].upper()}_LIBRARY");',
        f'    void *library = dlopen(path && *path ? path : "{soname}", RTLD_NOW | RTLD_LOCAL);',
        "    if (!library) {",
        "        const char *why = dlerror();",
        f'        snprintf(failure, sizeof failure, "{soname} cannot be opened (Debian: apt-get install {package}): %s",',
        '                 why ? why : "unknown");',
        "        return;",
        "    }",
        "    const char *name = NULL;",
    ]
    for name in pointers:
        lines.append(
            f'    if (!(*(void **)&functions.{name} = dlsym(library, "{name}"))) {{ name = "{name}"; goto lacking; }}')
    lines += [
        "    opened = 1;",
        "    return;",
        "lacking:",
        f'    snprintf(failure, sizeof failure, "{soname} has no %s (a version this build does not know)", name);',
        "}",
        "",
        f"int {prefix}_load_library(const char **error) {{",
        "    pthread_once(&once, open_library);",
        "    if (!opened && error) *error = failure;",
        "    return opened;",
        "}",
        "",
    ]
    for name in names:
        result, params, variadic = known[name]
        real = [(t, n) for t, n in params if t != "void"]
        formals = ", ".join(declarator(t, f"p{i}") for i, (t, _) in enumerate(real)) or "void"
        actuals = ", ".join(f"p{i}" for i in range(len(real)))
        if variadic:
            if name not in VARIADIC or not real:
                sys.exit(f"{target}: {name} takes variable arguments and has no va_list form here")
            last = f"p{len(real) - 1}"
            lines.append(
                f"{declarator(result, name)}({formals}, ...) {{ va_list rest; va_start(rest, {last}); "
                f"{result} value = functions.{VARIADIC[name]}({actuals}, rest); va_end(rest); return value; }}")
            continue
        call = f"functions.{name}({actuals})"
        body = f"{call};" if result == "void" else f"return {call};"
        lines.append(f"{declarator(result, name)}({formals}) {{ {body} }}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    stale = []
    for spec in LIBRARIES:
        text = generate(*spec)
        path = os.path.join(ROOT, "Sources", spec[0], "lazy.c")
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current == text:
            continue
        if args.check:
            stale.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"wrote {os.path.relpath(path, ROOT)}")
    if stale:
        sys.exit("out of date (run scripts/generate-lazy-libraries.py): " + ", ".join(stale))


if __name__ == "__main__":
    main()
