"""A reply's line breaks and indentation, kept when its Markdown is shown.

Markdown joins the lines of a paragraph and drops their leading spaces. A model that writes code
without a ``` fence, a poem or an address means every line it writes, as chat apps show it. So
outside fenced code, a paragraph's lines are joined by a line separator (U+2028: a line break
inside the paragraph, where Markdown sees none, so the paragraph keeps its spacing and its inline
syntax), and its lines' indentation becomes no-break spaces, which Markdown does not strip.
Blocks whose line breaks and indentation are their syntax (a list, a quote, a table, indented code,
link definitions) are left as they are, and so is a line that is a block of its own (a heading, a
rule, a setext underline, a fence, an HTML comment that ends on its line) or starts one, and the line
before it. (Inline HTML at a line's start, "<b>Note:</b> …", is a paragraph's line like any other.)
A line "2. " (an ordered item numbered other than 1) cannot start a list inside a paragraph, so it is
one of the paragraph's lines. Outside code (fences, indented code, code spans, in a quote or a list
item too), autolinks and HTML tags, a "*" between two letters or digits or between two punctuation
marks ("count(*)", "2*3*4") is shown as written, in a paragraph's lines and in list items, quotes and
table rows alike (not yet in a list item's paragraph indented four spaces after a blank line):
Markdown read two of them as the ends of an emphasis, so unfenced SQL lost the "*" of both its
count(*) and set the lines between them in italics (a user's try). A "*" beside a word on one side
only ("*word*", "(*a*)") or doubled ("**") is still emphasis.
"""
from __future__ import annotations

import re

NBSP, LINE_SEPARATOR = "\u00a0", "\u2028"
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_BLOCK_START = re.compile(r" {0,3}(([-*+]|\d{1,9}[.)])([ \t]|$)|[>|]|\[[^\]]+\]:)")   # a list item, a quote,
                                                                                    # a table row, a link definition
_ONE_LINE = re.compile(r" {0,3}(#{1,6}([ \t]|$)|(=+|-+|(\*[ \t]*){3,}|(_[ \t]*){3,})[ \t]*$|<!--.*-->)")   # a heading,
                                                    # an underline, a rule, an HTML comment that ends on its line
_LATER_ITEM = re.compile(r" {0,3}(?!0*1[.)])\d{1,9}[.)]([ \t]|$)")   # an ordered item numbered other than 1:
                                                                    # it cannot interrupt a paragraph (CommonMark)
_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*$")


def _own_block(line: str) -> bool:
    """Whether `line` is or starts a block of its own, even right after a paragraph's lines."""
    return bool(_BLOCK_START.match(line) or _ONE_LINE.match(line) or _FENCE.match(line))


PLAIN, SYNTAX, CODE = "plain", "syntax", "code"     # what a line is (_kinds)


def _kinds(lines: list[str]) -> list[str]:
    """For each line: PLAIN (a plain paragraph's), CODE (a fence's, fenced, or indented code's; a fence
    opened after a quote's or a list item's markers too) or SYNTAX (the rest: blank lines, one-line
    blocks, lists, quotes, tables), in one pass. A run is the
    lines from a blank line, a fence or a one-line block to the next; a run is Markdown syntax where it
    starts a block of its own or holds a table's rule, and from a line in it that starts a block of its
    own (a list after a paragraph's lines); code where it starts indented."""
    kinds = [SYNTAX] * len(lines)
    fence, start, nested = "", None, ""      # nested: a fence opened after a quote's or a list item's markers
    for i, line in enumerate([*lines, ""]):
        if nested and i < len(lines):        # its code, to its closing fence (within the run it is part of)
            kinds[i] = CODE
            inner = line[_CONTAINER.match(line).end():]
            if _closes(_FENCE.match(inner), nested, inner):
                nested = ""
            continue
        m = _FENCE.match(line)
        ends_run = fence or m or not line.strip() or _ONE_LINE.match(line)
        if ends_run and start is not None:
            run = lines[start:i]
            if run[0].startswith(("    ", "\t")):
                kinds[start:i] = [CODE] * len(run)
            elif not (_own_block(run[0]) or any(_TABLE_RULE.match(x) for x in run)):
                k = next((k for k in range(1, len(run)) if _own_block(run[k]) and not _LATER_ITEM.match(run[k])),
                         len(run))
                kinds[start:start + k] = [PLAIN] * k      # (up to a list or a quote that follows its lines)
            start = None
        if fence or m:
            if i < len(lines):
                kinds[i] = CODE
            if fence and _closes(m, fence, line):
                fence = ""
            elif not fence:
                fence = m.group(1)
        else:
            if not ends_run and start is None:
                start = i
            markers = _CONTAINER.match(line).end()
            opens = _FENCE.match(line[markers:])
            if opens and markers:                          # "- ```sql", "> ```"
                nested = opens.group(1)
    return kinds


def _closes(m, fence: str, line: str) -> bool:
    """Whether a fence match `m` on `line` closes the open `fence`."""
    return bool(m) and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(" `~")


_LEFT_ALONE = re.compile(r"(`+)[^`]*?\1|<[A-Za-z/!?][^<>\n]*>")   # a code span; an autolink or an HTML tag
_CONTAINER = re.compile(r"(?:[ \t]*(?:>[ \t]?|[-*+][ \t]+|\d{1,9}[.)][ \t]+))*")   # quote and list markers


def _literal_stars(line: str) -> str:
    """`line` with each "*" between two letters or digits, or two punctuation marks, escaped (outside its
    code spans, autolinks and HTML tags: `<http://e.com/a*b*c>` and `<img src="a*b*c.png">` keep their
    address); one beside a word on one side only, doubled or escaped already, is left as it is."""
    out, at = [], 0
    for span in [*_LEFT_ALONE.finditer(line), None]:
        end = span.start() if span else len(line)
        for i in range(at, end):
            ch = line[i]
            if ch == "*" and at < i < end - 1:
                before, after = line[i - 1], line[i + 1]
                if (not before.isspace() and not after.isspace() and "*" not in (before, after)
                        and before != "\\" and before.isalnum() == after.isalnum()):
                    ch = "\\*"
            out.append(ch)
        if span:
            out.append(span.group(0))
            at = span.end()
    return "".join(out)


def keep_line_breaks(text: str) -> str:
    """`text` (Markdown) with its paragraphs' line breaks and indentation kept on screen."""
    lines = text.replace("\r\n", "\n").split("\n")
    kinds = _kinds(lines)
    out: list[str] = []
    for i, line in enumerate(lines):
        if kinds[i] != PLAIN:
            # a list item's, a quote's or a table row's stars, not those of code, fenced (_kinds) or
            # indented past a quote's or a list item's markers
            if kinds[i] == SYNTAX and not line[_CONTAINER.match(line).end():].startswith(("    ", "\t")):
                line = _literal_stars(line)
            out.append(line + "\n")
            continue
        body = line.lstrip(" \t")
        line = NBSP * len(line[:len(line) - len(body)].replace("\t", "    ")) + _literal_stars(body)
        joined = (i + 1 < len(lines) and kinds[i + 1] == PLAIN
                  and (len(body) - len(body.rstrip("\\"))) % 2 == 0)     # (a backslash break is one already)
        out.append(line + (LINE_SEPARATOR if joined else "\n"))
    return "".join(out)[:-1]
