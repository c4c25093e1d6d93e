#!/usr/bin/env python3
"""Checks that a libxendump.so exports only what the public headers declare.

    check_exports.py LIBRARY INCLUDEDIR

Lists the library's dynamic symbols (nm -D --defined-only), demangles them,
and matches each against the names declared by the headers under
INCLUDEDIR/xendump: functions, static members and variables of the
namespaces and classes those headers define (constructors, destructors and
assignment of a class they define included), and the vtable and type
information of those classes. Prints every symbol that matches nothing and
exits 1 when there is one; exits 0 otherwise. Template code of other
libraries (std::, nlohmann::) instantiated for the API's types, and names of
the library's internal namespaces, never match.
"""
import os
import re
import subprocess
import sys

TYPE_PREFIXES = ("typeinfo name for ", "typeinfo for ", "vtable for ", "VTT for ",
                 "construction vtable for ")
THUNK_PREFIXES = ("non-virtual thunk to ", "virtual thunk to ", "covariant return thunk to ")


def strip_source(text):
    """Comments, string and character literals and preprocessor lines out."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\])*'", "''", text)
    return "\n".join(" " if line.lstrip().startswith("#") else line for line in text.split("\n"))


TOKEN = re.compile(r"[A-Za-z_]\w*|::|->|\S")


def declared_names(include_dir):
    """(names, classes): qualified names the headers declare, classes they define."""
    names, classes = set(), set()
    for root, _, files in os.walk(os.path.join(include_dir, "xendump")):
        for f in sorted(files):
            if f.endswith((".hpp", ".h")):
                with open(os.path.join(root, f), encoding="utf-8") as fh:
                    scan(TOKEN.findall(strip_source(fh.read())), names, classes)
    return names, classes


def scan(toks, names, classes):
    stack = []  # (kind, name): kind is "ns", "class", "enum" or "block"

    def scope():
        return "::".join(n for k, n in stack if k in ("ns", "class") and n)

    def declaring():
        return not stack or stack[-1][0] in ("ns", "class")

    i, n = 0, len(toks)
    pending = None  # what the next "{" opens
    while i < n:
        t = toks[i]
        if t == "namespace" and declaring():
            j, parts = i + 1, []
            while j < n and toks[j] not in ("{", ";", "="):
                if toks[j] != "::":
                    parts.append(toks[j])
                j += 1
            if j < n and toks[j] == "{":
                stack.append(("ns", "::".join(parts)))
            i = j + 1
            continue
        if t == "enum" and declaring():
            pending = ("enum", "")
        elif t in ("class", "struct", "union") and declaring() and i + 1 < n:
            # A definition "class Name [final] [: bases] {", not a forward
            # declaration, a friend or a template parameter.
            name, j = toks[i + 1], i + 2
            while j < n and toks[j] not in ("{", ";", ">", ",", ")", "("):
                j += 1
            if j < n and toks[j] == "{" and (i == 0 or toks[i - 1] not in ("enum", "friend")):
                pending = ("class", name)
                classes.add(scope() + "::" + name if scope() else name)
        elif t == "{":
            stack.append(pending or ("block", ""))
            pending = None
        elif t == "}":
            if stack:
                stack.pop()
            pending = None
        elif t == ";":
            pending = None
        elif declaring() and pending is None:
            nxt = toks[i + 1] if i + 1 < n else ""
            if t == "operator":
                j, op = i + 1, ""
                while j < n and not (toks[j] == "(" and op):
                    op += toks[j]
                    j += 1
                if op == "(" and j + 1 < n and toks[j] == ")":  # operator()
                    op = "()"
                names.add(scope() + "::operator" + op)
                i = j
                continue
            if re.match(r"[A-Za-z_]\w*$", t) and nxt in ("(", ";", "=", "[", "{"):
                prefix = "~" if i > 0 and toks[i - 1] == "~" else ""
                names.add(scope() + "::" + prefix + t)
        i += 1


def split_top(s, sep_chars):
    """Index of the last top-level character of sep_chars (outside <>, (), [])."""
    depth = 0
    for k in range(len(s) - 1, -1, -1):
        c = s[k]
        if c in ">)]":
            depth += 1
        elif c in "<([":
            depth -= 1
        elif depth == 0 and c in sep_chars:
            return k
    return -1


def without_templates(name):
    out, depth = "", 0
    for idx, c in enumerate(name):
        if c == "<" and not name[:idx].endswith("operator") and not name[:idx].endswith("operator<"):
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif depth == 0:
            out += c
    return out


def entity_of(symbol):
    """('type', NAME) for vtables and type information, ('name', NAME) else."""
    s = symbol
    for p in THUNK_PREFIXES:
        if s.startswith(p):
            s = s[len(p):]
    for p in TYPE_PREFIXES:
        if s.startswith(p):
            return "type", s[len(p):]
    s = s.replace("[abi:cxx11]", "")
    s = re.sub(r"( const| volatile| &&| &)+$", "", s)
    if s.endswith(")"):
        depth = 0
        for k in range(len(s) - 1, -1, -1):
            if s[k] == ")":
                depth += 1
            elif s[k] == "(":
                depth -= 1
                if depth == 0:
                    s = s[:k]
                    break
    s = without_templates(s)
    sp = split_top(s, " ")  # "void xendump::f<int>" -> the name
    if sp >= 0 and "operator" not in s[sp:]:
        s = s[sp + 1:]
    return "name", s.strip()


def allowed(symbol, names, classes):
    kind, name = entity_of(symbol)
    if kind == "type":
        return name in classes
    if name in names:
        return True
    # A special member a class of the headers has without declaring it.
    owner, _, member = name.rpartition("::")
    return owner in classes and member in (owner.rpartition("::")[2], "~" + owner.rpartition("::")[2], "operator=")


def exported_symbols(library):
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", library], check=True,
                         capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3 or parts[1] == "A":  # A: the version node itself
            continue
        syms.append(re.sub(r"@@?[A-Za-z0-9_.]+$", "", parts[2]))
    return syms


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    library, include_dir = sys.argv[1], sys.argv[2]
    names, classes = declared_names(include_dir)
    syms = exported_symbols(library)
    bad = sorted({s for s in syms if not allowed(s, names, classes)})
    print(f"{library}: {len(syms)} exported symbols, {len(syms) - len(bad)} declared by the headers of {include_dir}")
    for s in bad:
        print(f"  not declared by a public header: {s}")
    if bad:
        print(f"{library}: {len(bad)} exported symbol(s) are not the public API "
              f"(libdump/libxendump.map, libdump/src/public_api.hpp)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
