"""Built-in benchmark prompts, one per case the literature names, and loading prompts from a file."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BenchPrompt:
    name: str
    text: str
    note: str = ""


_CODE_TO_EDIT = '''def load_scores(path):
    scores = {}
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, value = line.split(",")
            scores[name.strip()] = float(value)
    return scores


def best_players(scores, count):
    ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
    return [name for name, value in ranked[:count]]


def average_score(scores):
    if not scores:
        return 0.0
    return sum(scores.values()) / len(scores)


def report(path, count=3):
    scores = load_scores(path)
    print("players:", len(scores))
    print("average:", round(average_score(scores), 2))
    for name in best_players(scores, count):
        print(" -", name, scores[name])
'''

_ARTICLE = ("The lighthouse at Point Carrow was switched to automatic operation in 1994, ending two "
            "centuries of keepers. \"The lamp never cared who was watching it,\" said Margaret Doyle, the "
            "last keeper, who had tended it for thirty-one years. The coast guard says the automated "
            "light has failed only twice since then, both times during winter storms that cut power to "
            "the headland. Local historians argue that something was lost all the same. \"A keeper "
            "noticed things a sensor never will,\" wrote Tom Becker in the county gazette, pointing to "
            "the 1987 rescue of a fishing crew whose flares only Doyle had seen. The council now plans to "
            "open the keeper's cottage as a small museum, with Doyle's logbooks on display. \"People "
            "should read what the sea looked like, night after night,\" she said. Funding for the "
            "museum is not yet secured; a decision is expected in the spring.")

BUILTIN: list[BenchPrompt] = [
    BenchPrompt("code", "Write a Python function that parses a CSV file into a list of dictionaries, with "
                        "error handling for missing files and malformed rows, and a docstring.",
                "code writing: a draft model of the same family predicts it well"),
    BenchPrompt("edit", "Add type hints to every function in this Python module and return the whole "
                        "module, unchanged otherwise:\n\n```python\n" + _CODE_TO_EDIT + "```",
                "editing code given in the prompt: copy-heavy, where prompt lookup shines"),
    BenchPrompt("summary", "Summarise this article in three bullet points, quoting the key sentences "
                           "exactly:\n\n" + _ARTICLE,
                "summarising a given text with quotes: partly copied"),
    BenchPrompt("story", "Write a short story about a lighthouse keeper who finds a message in a bottle.",
                "open-ended story: little to copy, hard to guess; speculation is known to do badly"),
]


def load_prompts(source: str) -> list[BenchPrompt]:
    """`builtin`, a JSON file (a list of strings or of {"name", "prompt"}), or a text file whose
    prompts are separated by lines holding only `---`. A file that cannot be read, or holds no such
    list, raises ValueError with a one-line message naming it."""
    if source == "builtin":
        return list(BUILTIN)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the prompts file {source}: "
                         f"{exc.strerror if isinstance(exc, OSError) else 'it is not UTF-8 text'}") from None
    if path.suffix.lower() == ".json":
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the prompts file {source} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(items, list) or not all(isinstance(i, str) or (isinstance(i, dict) and "prompt" in i)
                                                  for i in items):
            raise ValueError(f"the prompts file {source} must hold a list of prompts: strings, or "
                             '{"name": ..., "prompt": ...} objects')
        out = []
        for i, item in enumerate(items):
            if isinstance(item, str):
                out.append(BenchPrompt(f"p{i + 1}", item))
            else:
                out.append(BenchPrompt(str(item.get("name", f"p{i + 1}")), str(item["prompt"])))
        return out
    chunks = [c.strip() for c in text.replace("\r\n", "\n").split("\n---\n")]
    return [BenchPrompt(f"p{i + 1}", c) for i, c in enumerate(chunks) if c]
