"""A reply's line breaks and indentation, kept when its Markdown is shown.

Markdown joins the lines of a paragraph and drops their leading spaces. A model that writes code
without a ``` fence, a poem or an address means every line it writes, as chat apps show it. So
outside fenced code, a paragraph's lines are joined by a line separator (U+2028: a line break
inside the paragraph, where Markdown sees none, so the paragraph keeps its spacing and its inline
syntax), and a continuation line's indentation becomes no-break spaces, which Markdown does not
strip. Blocks whose line breaks and indentation are their syntax (a list, a quote, a table,
indented code) are left as they are, and so is a line that starts a block of its own (a list item,
a heading, a rule, a fence), and the line before it.
"""
from __future__ import annotations

import re

NBSP, LINE_SEPARATOR = "\u00a0", "\u2028"
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_BLOCK_START = re.compile(r"\s*(([-*+]|\d{1,9}[.)])(\s|$)|[>|])")
_HEADING = re.compile(r" {0,3}#{1,6}(\s|$)")
_RULE = re.compile(r" {0,3}(=+|-+|(\*\s*){3,}|(_\s*){3,})\s*$")          # a setext underline or a thematic break
_TABLE_RULE = re.compile(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)+\|?\s*$")


def _own_block(line: str) -> bool:
    """Whether `line` starts a block of its own (or ends a setext heading), even after a paragraph's lines."""
    return bool(_BLOCK_START.match(line) or _HEADING.match(line) or _RULE.match(line) or _FENCE.match(line))


def _syntax(run: list[str]) -> bool:
    """Whether a run of non-blank lines is a block whose line breaks and indentation are its syntax."""
    return _own_block(run[0]) or run[0].startswith(("    ", "\t")) or any(_TABLE_RULE.match(x) for x in run)


def keep_line_breaks(text: str) -> str:
    """`text` (Markdown) with its paragraphs' line breaks and continuation lines' indentation kept on screen."""
    lines = text.split("\n")
    out: list[str] = []
    fence = ""                  # the open fence's marker ("```", "~~~~"), "" outside
    mode = ""                   # the run of lines being read: "plain", "syntax", or "" before its first line
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence or m or not line.strip():
            if fence and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(" `~"):
                fence = ""
            elif not fence and m:
                fence = m.group(1)
            mode = ""
            out.append(line + "\n")
            continue
        if not mode:                               # a run starts here (a heading is a run of one line)
            end = i
            while end < len(lines) and lines[end].strip() and not _FENCE.match(lines[end]):
                end += 1
            mode = "syntax" if _syntax(lines[i:end]) else "plain"
            if _HEADING.match(line):
                mode = ""
                out.append(line + "\n")
                continue
        elif mode == "plain" and line[:1] in " \t":   # a continuation line: its indentation kept
            body = line.lstrip(" \t")
            line = NBSP * len(line[:len(line) - len(body)].replace("\t", "    ")) + body
        if mode == "syntax":
            out.append(line + "\n")
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        joined = bool(nxt.strip()) and not _own_block(nxt)
        if not joined:
            mode = ""                              # (a list, a rule or a heading may follow)
        out.append(line + (LINE_SEPARATOR if joined else "\n"))
    return "".join(out)[:-1]
