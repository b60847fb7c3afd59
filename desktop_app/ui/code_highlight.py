"""Syntax colours for the code blocks of a Markdown message, by Pygments.

Qt's Markdown import marks the blocks of a code block in their block format (`BlockCodeLanguage`, and
`BlockCodeFence` for a fenced one); everything else is left alone, so prose costs one property look-up
per block. The lines of one code block (a "run" of blocks) are lexed together, so that a string or a
comment over several lines is coloured as one, and the result is kept for the next repaint: a
streaming reply re-lexes only the code block that is growing. An empty or unknown language is
guessed from the code (once per block of code) among common languages — Pygments' own guess_lexer
imports every lexer it has, seconds on the UI thread, and often guesses wrong — and plain text is
the fallback.
"""
from __future__ import annotations

import re
from collections import OrderedDict

from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextFormat
from pygments import lex
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.util import ClassNotFound

LIGHT_STYLE = "default"
DARK_STYLE = "monokai"
CACHE_SIZE = 64                  # lexed code blocks kept, per document


def code_language(block) -> str | None:
    """The language of a code block's line ("" when it does not say), or None for a block that is not code."""
    fmt = block.blockFormat()
    if not (fmt.hasProperty(QTextFormat.BlockCodeLanguage) or fmt.hasProperty(QTextFormat.BlockCodeFence)):
        return None
    return str(fmt.property(QTextFormat.BlockCodeLanguage) or "").strip().lower()


# Signs of a language in unlabelled code, tried in order (the first that matches wins).
GUESSES = [
    ("python", r"^\s*(def \w+\(.*\)\s*(->.*)?:|class \w+.*:|from [\w.]+ import |import \w+|print\(|if __name__)"),
    ("cpp", r"^\s*(#include\s*<\w+>|using namespace |std::|template\s*<)"),
    ("c", r"^\s*#include\s*[<\"]|\bint main\s*\(|printf\s*\("),
    ("rust", r"\bfn \w+\s*\(|\blet mut\b|println!\("),
    ("go", r"^\s*package \w+|\bfunc \w+\s*\(|fmt\.Print"),
    ("java", r"\bpublic (static )?(class|void)\b|System\.out\.print"),
    ("javascript", r"\bfunction \w*\s*\(|\bconst \w+\s*=|console\.log\(|=>"),
    ("html", r"^\s*<(!DOCTYPE|html|div|body|head|p|span|script)\b"),
    ("sql", r"(?i)^\s*(SELECT\s.+\sFROM|INSERT INTO|CREATE TABLE|UPDATE \w+ SET)\b"),
    ("json", r"^\s*[\[{]\s*(\"|$|\d|\[|{)"),
    ("bash", r"^\s*(#!/bin/(ba)?sh|\$ |sudo |apt(-get)? |pip install |cd |ls |echo |export \w+=)"),
]
_GUESSES = [(name, re.compile(pattern, re.MULTILINE)) for name, pattern in GUESSES]


def guess_language(code: str) -> str:
    """A language for unlabelled code ("" when nothing looks familiar)."""
    for name, pattern in _GUESSES:
        if pattern.search(code):
            return name
    return ""


def lexer_for(language: str, code: str):
    """The lexer for a code block's language, a guess from the code when the language is empty or
    unknown, plain text when nothing fits."""
    options = {"stripnl": False, "ensurenl": False}
    for name in (language, guess_language(code)):
        if name:
            try:
                return get_lexer_by_name(name, **options)
            except ClassNotFound:
                pass
    return TextLexer(**options)


class CodeHighlighter(QSyntaxHighlighter):
    def __init__(self, document, dark: bool = False):
        super().__init__(document)
        self.style = get_style_by_name(DARK_STYLE if dark else LIGHT_STYLE)
        self._formats: dict = {}                          # token type -> QTextCharFormat or None
        self._lexed: OrderedDict = OrderedDict()          # (language, code) -> formats per line
        self._guessed: dict = {}                          # (language, start of the code) -> its lexer
        self._run: tuple[int, list[str], list] | None = None   # the last run: first block number, lines, formats

    # -- formats
    def _format(self, ttype) -> QTextCharFormat | None:
        if ttype not in self._formats:
            s = self.style.style_for_token(ttype)
            fmt = None
            if s.get("color") or s.get("bold") or s.get("italic"):
                fmt = QTextCharFormat()
                if s.get("color"):
                    fmt.setForeground(QColor("#" + s["color"]))
                if s.get("bold"):
                    fmt.setFontWeight(QFont.Bold)
                if s.get("italic"):
                    fmt.setFontItalic(True)
            self._formats[ttype] = fmt
        return self._formats[ttype]

    def _lex(self, language: str, lines: list[str]) -> list:
        """[(start, length, format), ...] for each line of a code block."""
        code = "\n".join(lines)
        key = (language, code)
        if key in self._lexed:
            self._lexed.move_to_end(key)
            return self._lexed[key]
        guess_key = (language, code[:200])                # guess once, from the code's beginning
        lexer = self._guessed.get(guess_key) or lexer_for(language, code)
        self._guessed[guess_key] = lexer
        per_line: list[list] = [[] for _ in lines]
        line, col = 0, 0
        for ttype, value in lex(code, lexer):
            fmt = self._format(ttype)
            for k, part in enumerate(value.split("\n")):
                if k:
                    line, col = line + 1, 0
                if fmt is not None and part and line < len(per_line):
                    per_line[line].append((col, len(part), fmt))
                col += len(part)
        self._lexed[key] = per_line
        while len(self._lexed) > CACHE_SIZE:
            self._lexed.popitem(last=False)
        return per_line

    # -- QSyntaxHighlighter
    def highlightBlock(self, text: str) -> None:
        block = self.currentBlock()
        language = code_language(block)
        if language is None:
            return
        number = block.blockNumber()
        run = self._run
        if run is None or not (run[0] <= number < run[0] + len(run[1])) or run[1][number - run[0]] != text:
            first = block
            while first.previous().isValid() and code_language(first.previous()) == language:
                first = first.previous()
            lines, b = [], first
            while b.isValid() and code_language(b) == language:
                lines.append(b.text())
                b = b.next()
            run = self._run = (first.blockNumber(), lines, self._lex(language, lines))
        for start, length, fmt in run[2][number - run[0]]:
            self.setFormat(start, length, fmt)
