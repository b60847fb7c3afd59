"""RoundRebuilder on the chunk sequences llama-server streams (its order, server-context.cpp: a round's
drafts are counted when drafted, its kept ones after verifying, then its k + 1 tokens go out one
chunk each). The real server's streams are checked in test_remote_server.py."""
from __future__ import annotations

from desktop_app.engine.events import TokenKind
from desktop_app.remote.rounds import RoundRebuilder

A, C, B, P = TokenKind.ACCEPTED, TokenKind.CORRECTION, TokenKind.BONUS, TokenKind.PLAIN


def t(n, d=0, k=0, ms=None):
    out = {"predicted_n": n, "predicted_ms": ms if ms is not None else 10.0 * n}
    if d:
        out.update(draft_n=d, draft_n_accepted=k)
    return out


def run(chunks, final=None, end="eos", max_tokens=None):
    rb = RoundRebuilder(max_tokens)
    rounds = []
    for text, timings in chunks:
        rounds += rb.feed(text, timings)
    rounds += rb.finish(final, end)
    return rounds


def test_rounds_plain_steps_and_kinds():
    rounds = run([("Hel", t(1)),                                  # from the prompt pass: plain
                  ("lo", t(2, 4, 2)), (",", t(3, 4, 2)), (" wor", t(4, 4, 2)),   # 4 drafted, 2 kept + correction
                  ("ld", t(5, 4, 2)),                               # nothing drafted: a plain step
                  ("!", t(6, 7, 5)), (" Bye", t(7, 7, 5)), (".", t(8, 7, 5)), ("\n", t(9, 7, 5))],  # 3 of 3 + bonus
                 final=t(10, 7, 5))          # the end-of-generation token: counted, no text, no chunk of its own
    assert [(r.gamma, r.accepted, r.kinds, r.emitted_text) for r in rounds] == [
        (0, 0, (P,), ("Hel",)),
        (4, 2, (A, A, C), ("lo", ",", " wor")),
        (0, 0, (P,), ("ld",)),
        (3, 3, (A, A, A, B), ("!", " Bye", ".", "\n")),
        (0, 0, (P,), ("",))]
    assert rounds[1].drafted_text == ("lo", ",", "?", "?")          # rejected drafts: text unknown
    assert [r.index for r in rounds] == [0, 1, 2, 3, 4] and rounds[-1].end == "eos"
    assert abs(rounds[1].t_round_s - 0.03) < 1e-9 and rounds[1].t_verify_s == 0    # its share of predicted_ms


def test_a_held_back_chunk_gives_its_text_to_the_next():
    rounds = run([("a", t(1)), ("<", None), ("b>", t(3, 2, 1)), ("c", t(4, 2, 1))])
    # the held-back "<" arrives with "b>": tokens 2-3 were the round's first two (text on the last)
    assert [(r.gamma, r.accepted, r.emitted_text) for r in rounds] == [(0, 0, ("a",)), (2, 1, ("", "<b>")),
                                                                        (0, 0, ("c",))]


def test_a_round_cut_by_the_end_of_the_reply():
    rounds = run([("x", t(1)), ("y", t(2, 6, 4))], final=t(3, 6, 4), end="eos")
    # 4 of 6 kept, but the reply ended at its second token (an end-of-generation token, no text)
    [first, cut] = rounds
    assert (cut.gamma, cut.accepted, cut.kinds, cut.emitted_text) == (6, 4, (A, A), ("y", ""))
    assert cut.end == "eos" and cut.drafted_text == ("y", "", "?", "?", "?", "?")


def test_a_reply_with_no_speculation_is_all_plain_steps():
    rounds = run([(c, t(i + 1)) for i, c in enumerate("abc")], final=t(3), end="max_tokens", max_tokens=3)
    assert [(r.gamma, r.kinds, r.emitted_text) for r in rounds] == [(0, (P,), ("a",)), (0, (P,), ("b",)),
                                                                     (0, (P,), ("c",))]
    # the server's last chunk at max_tokens brings no token: the round that reached the limit says so
    assert [r.end for r in rounds] == ["", "", "max_tokens"]


def test_the_round_that_reaches_max_tokens_is_handed_on_marked_at_once():
    rb = RoundRebuilder(max_tokens=3)
    assert [r.gamma for r in rb.feed("x", t(1))] == [0]
    assert rb.feed("y", t(2, 6, 4)) == []                                # 4 of 6 kept: waiting for 5 tokens
    [cut] = rb.feed("z", t(3, 6, 4))                                     # but the limit came at its second
    assert (cut.gamma, cut.accepted, cut.kinds, cut.emitted_text, cut.end) == (6, 4, (A, A), ("y", "z"), "max_tokens")
    assert rb.finish(t(3, 6, 4), "max_tokens") == []                     # the server's last chunk adds nothing


def test_a_held_back_last_token_finishes_its_round_not_the_next():
    """Round A's last token was held back: the next chunk brings it with round B's first, under B's pair."""
    rounds = run([("a", t(1)), ("b", t(2, 4, 2, ms=50)), ("c", t(3, 4, 2, ms=50)),
                  ("de", t(5, 8, 5, ms=90)), ("f", t(6, 8, 5, ms=90)), ("g", t(7, 8, 5, ms=90)),
                  ("h", t(8, 8, 5, ms=90))])
    assert [(r.gamma, r.accepted, r.kinds, r.emitted_text) for r in rounds] == [
        (0, 0, (P,), ("a",)),
        (4, 2, (A, A, C), ("b", "c", "")),            # its token arrived with the next round's chunk
        (4, 3, (A, A, A, C), ("de", "f", "g", "h"))]
    assert abs(rounds[1].t_round_s - 0.04) < 1e-9 and abs(rounds[2].t_round_s - 0.04) < 1e-9


def test_rounds_are_handed_on_as_soon_as_they_are_complete():
    rb = RoundRebuilder()
    assert [r.gamma for r in rb.feed("a", t(1))] == [0]                  # a plain step: at once
    assert rb.feed("b", t(2, 3, 1)) == []                                # waiting for its second token
    assert [(r.gamma, r.accepted) for r in rb.feed("c", t(3, 3, 1))] == [(3, 1)]
    assert [r.gamma for r in rb.feed("d", t(4, 3, 1))] == [0]            # then a plain step, at once


def test_text_held_back_until_the_end_belongs_before_the_end_of_generation_token():
    rb = RoundRebuilder()
    rounds = rb.feed("a", t(1))
    rounds += rb.feed("bc", t(3), "eos")              # token 2's text was held back; token 3 ends the reply
    rounds += rb.finish(None, "eos")
    assert [(r.emitted_text, r.end) for r in rounds] == [(("a",), ""), (("bc",), ""), (("",), "eos")]


def test_an_end_of_generation_token_at_the_token_limit_is_an_end_of_generation():
    rb = RoundRebuilder(max_tokens=3)
    rounds = rb.feed("a", t(1)) + rb.feed("b", t(2))
    rounds += rb.feed("", t(3), "eos") + rb.finish(None, "eos")     # the server says "stop", not "length"
    assert [(r.emitted_text, r.end) for r in rounds] == [(("a",), ""), (("b",), ""), (("",), "eos")]
