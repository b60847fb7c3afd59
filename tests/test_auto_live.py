"""Auto mode in the real decoder, on the test pair: its own γ range and the draft model's lazy prefill."""
import pytest

from desktop_app.engine import GREEDY, ModelPair
from desktop_app.engine.auto_policy import FIRST_PROBE, AutoPolicy
from desktop_app.engine.explain import explain

from engine_helpers import first_divergence_gap, max_batch_deviation, prompt_tokens, run

pytestmark = pytest.mark.network

REPEAT = ("<|im_start|>user\nRepeat exactly: the cat sat on the mat, the dog lay on the rug, the bird flew over "
          "the house.<|im_end|>\n<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def pair(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path) as p:
        yield p


def _fix_costs(pair, monkeypatch, verify_ms: dict, draft_ms: float):
    """Given costs that neither rounds nor the load move, and a fresh policy on them. The recent rate of rounds
    without the draft model, which its catch-up must beat, is timed on the clock, not priced: the test
    pair's real passes (7 ms) against these prices (30 ms) put it at 150 tok/s where the prices say 33,
    and whether the draft model ever caught up in a reply hung on how busy the machine was. So it
    counts for nothing here: the prices alone decide."""
    costs = pair.decoder.costs
    monkeypatch.setattr(costs, "verify_s", {k: v / 1000 for k, v in verify_ms.items()})
    monkeypatch.setattr(costs, "draft_step_s", {"model": draft_ms / 1000})
    monkeypatch.setattr(costs, "prefill_s", {"model": draft_ms / 1000 / 8})
    for name in ("record_verify", "record_draft", "record_prefill"):
        monkeypatch.setattr(costs, name, lambda *a: None)
    monkeypatch.setattr(AutoPolicy, "recent_rate", property(lambda self: 0.0))
    monkeypatch.setattr(pair.decoder, "policy", AutoPolicy(costs))
    # nor does the machine's load: a thread count it changed brings that count's own costs in place of
    # these (a full CI run: auto copied where these prices say no copy can pay)
    monkeypatch.setattr(pair.decoder.threads, "_others", None)


def test_auto_drafts_longer_than_the_fixed_gamma(pair, monkeypatch):
    """draft max is fixed mode's γ, not auto's ceiling: with checks nearly free, auto copies long runs
    even when draft max says 2."""
    _fix_costs(pair, monkeypatch, {1: 30, 2: 31, 3: 32, 5: 34, 9: 38, 17: 46, 33: 60}, 60)
    prompt = prompt_tokens(pair.target, REPEAT)
    rounds, _, finish = run(pair, prompt, GREEDY, max_tokens=48, drafter="lookup", draft_max=2, auto=True)
    assert max(r.gamma for r in rounds) > 2
    assert sum(r.accepted for r in rounds) >= 8
    _, _, plain = run(pair, prompt, GREEDY, max_tokens=48, enabled=False)
    assert plain.tokens == finish.tokens


def test_a_new_reply_does_not_copy_the_last_reply_s_opening(pair, monkeypatch):
    """In a conversation the chat template's header for a reply matches the start of every earlier
    reply: a five-token match, after which prompt lookup would copy the last reply's opening. Auto
    counts only the match's tokens within the reply (and the header's line break), so with checks
    nearly free it still does not copy at a reply's first round."""
    from desktop_app.engine.drafters import PromptLookupDrafter

    _fix_costs(pair, monkeypatch, {1: 30, 2: 31, 3: 32, 5: 34, 9: 38, 17: 46, 33: 60}, 60)
    story = "Once upon a time, there was a lighthouse keeper named Jack who lived on a small island."
    prompt = prompt_tokens(pair.target, f"<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"
                                        f"{story}<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                                        "<|im_start|>assistant\n")
    copied, match_len = PromptLookupDrafter().copy(prompt, 32)       # what a lookup finds there
    assert match_len >= 5 and pair.target.detokenize(copied).startswith("Once upon a time")
    rounds, _, finish = run(pair, prompt, GREEDY, max_tokens=16, drafter="lookup", auto=True)
    assert rounds[0].gamma == 0 and finish.tokens


def test_the_draft_model_reads_the_prompt_only_when_auto_drafts_with_it(pair, monkeypatch):
    """Where no draft-model round could pay (a draft step dearer than a target pass), auto never
    drafts with it and it reads nothing: the reply starts as fast as plain decoding's. In fixed mode
    it reads the prompt at once. Where it pays, it catches up on its first round and then drafts."""
    prompt = prompt_tokens(pair.target)
    _fix_costs(pair, monkeypatch, {1: 30, 2: 60, 3: 90, 5: 150, 9: 270, 17: 510, 33: 990}, 60)
    pair.draft_ctx.clear()
    rounds, _, idle = run(pair, prompt, GREEDY, max_tokens=24, drafter="model", draft_max=4, auto=True)
    assert "model" not in {r.drafter for r in rounds}
    assert pair.draft_ctx.tokens == []
    # the panel's sentence says so, and why (a new user's try: the draft model loaded, never used, unexplained)
    assert idle.stats.unused_draft_c == pytest.approx(2.0) and len(rounds) >= FIRST_PROBE
    assert (" Auto did not draft with the draft model: a step of it would cost 2.00 of a target pass here, and "
            "with that and the cost of catching it up on the text, no round with it was predicted to beat plain "
            "decoding.") in explain(idle.stats)     # (then what other work on the CPUs did, where it did)

    pair.draft_ctx.clear()
    _, _, fixed = run(pair, prompt, GREEDY, max_tokens=1, drafter="model", draft_max=4)
    assert len(pair.draft_ctx.tokens) >= len(prompt) - 1
    assert fixed.stats.unused_draft_c is None

    _fix_costs(pair, monkeypatch, {1: 30, 2: 31, 3: 32, 5: 34, 9: 38, 17: 46, 33: 60}, 1)
    pair.draft_ctx.clear()
    rounds, _, finish = run(pair, prompt, GREEDY, max_tokens=48, drafter="model", draft_max=4, auto=True)
    model_rounds = [r for r in rounds if r.drafter == "model"]
    assert model_rounds and sum(r.accepted for r in model_rounds) > 0
    assert finish.stats.unused_draft_c is None and "Auto did not draft" not in explain(finish.stats)
    assert finish.stats.t_catch_up_s > 0 and idle.stats.t_catch_up_s == 0.0    # (not plain's: GenerationStats)
    assert pair.draft_ctx.tokens[:len(prompt) - 1] == prompt[:-1]      # it caught up on the prompt
    _, _, plain = run(pair, prompt, GREEDY, max_tokens=48, enabled=False)
    gap = first_divergence_gap(pair.target, prompt, plain.tokens, finish.tokens)
    assert gap is None or gap[1] <= 2 * max_batch_deviation(pair.target)


def test_a_reply_switched_from_auto_to_the_draft_model_is_not_said_to_have_left_it_unused(pair, monkeypatch):
    """Auto weighed the draft model and did not choose it; then the user switched to fixed mode with it,
    mid-reply, and it drafted: the sentence must not say the draft model went unused (a review)."""
    from desktop_app.engine import Controls, FinishEvent, RoundEvent, SpecSettings

    _fix_costs(pair, monkeypatch, {1: 30, 2: 60, 3: 90, 5: 150, 9: 270, 17: 510, 33: 990}, 60)
    controls = Controls(SpecSettings(drafter="model", draft_max=4, auto=True))
    rounds, finish = [], None
    for event in pair.generate(prompt_tokens(pair.target), GREEDY, controls, 40):
        if isinstance(event, RoundEvent):
            rounds.append(event)
            if len(rounds) == FIRST_PROBE + 4:
                controls.update(auto=False)
        elif isinstance(event, FinishEvent):
            finish = event
    assert len(rounds) > FIRST_PROBE + 4
    assert "model" not in {r.drafter for r in rounds[:FIRST_PROBE + 4]}
    assert "model" in {r.drafter for r in rounds[FIRST_PROBE + 4:]}
    assert finish.stats.unused_draft_c is None and "Auto did not draft" not in explain(finish.stats)


def test_a_long_run_of_copies_keeps_the_checks_priced_as_timed(pair, monkeypatch):
    """A new user's try: asked to write a word 300 times, the test model loops on one line, and auto
    copied it, every copy kept, for 50 rounds, then decoded the last 280 of 1024 tokens plainly (the
    summary said 1.39x plain measured, 0.98x predicted). The context had grown from 50 tokens to 740 in those rounds, every
    pass slowing with it, while the single-token pass's price stayed where it was before them: each check
    priced against it crept up (a 33-token one from 22.8 single passes to 33), until copying looked no
    better than plain decoding. Real costs, as timed at load and by the reply's own rounds: over the
    second half of such a reply, a check's price in single passes stays within 15 % of where it was
    (it rose by a quarter here; the first half's rounds may correct a price timed wrong at load, and a
    plain step in the second half lets the next rounds correct them again: one check held up moves its
    own price by up to 10 %)."""
    from desktop_app.engine import Controls, FinishEvent, RoundEvent, SpecSettings

    prompt = prompt_tokens(pair.target, "<|im_start|>user\nWrite the word apples, followed by a comma, 300 times."
                                        "<|im_end|>\n<|im_start|>assistant\n")
    threads = pair.decoder.threads          # one thread count, one set of prices (another count has its own)
    monkeypatch.setattr(threads, "adjust", lambda force=False: threads.current)
    n, written, rounds, half, finish = 768, 0, [], None, None
    for event in pair.generate(prompt, GREEDY, Controls(SpecSettings(drafter="lookup", auto=True)), n):
        if isinstance(event, RoundEvent):
            rounds.append(event)
            written += event.accepted + 1
            if half is None and written >= n // 2:
                costs = pair.decoder.costs
                half = {k: costs.verify_cost(k) / costs.verify_cost(1) for k in (5, 9, 17, 33)}
        elif isinstance(event, FinishEvent):
            finish = event
    assert len(finish.tokens) == n and half is not None
    second = rounds[len(rounds) // 2:]
    assert sum(r.accepted for r in rounds) >= n // 2 and sum(r.accepted > 0 for r in second) >= 10   # it loops
    assert pair.decoder.costs is costs
    end = {k: costs.verify_cost(k) / costs.verify_cost(1) for k in half}
    assert all(end[k] < 1.15 * half[k] for k in half), (half, end, [(len(r.drafted), r.accepted) for r in rounds])


def test_auto_says_how_much_of_the_copies_it_passed_over_the_target_wrote(pair, monkeypatch):
    """A new user's try: auto copied a prompt it was asked to edit in 4 of 143 rounds, every copy kept,
    and nothing said why it copied so seldom. Where a check costs as many passes as it has tokens, no copy
    can pay and auto takes plain steps throughout: the reply says in how many of them a copy was on offer
    and how much of it the target then wrote, which here (the reply repeats the prompt) is most of it."""
    _fix_costs(pair, monkeypatch, {1: 30, 2: 60, 3: 90, 5: 150, 9: 270, 17: 510, 33: 990}, 60)
    prompt = prompt_tokens(pair.target, REPEAT)
    rounds, _, finish = run(pair, prompt, GREEDY, max_tokens=32, drafter="lookup", auto=True)
    s = finish.stats
    assert {r.drafter for r in rounds} == {"none"}
    assert 10 <= s.n_copies_passed <= len(rounds)
    assert s.n_copies_passed_right >= 0.6 * s.n_copies_passed and s.n_copies_passed_kept > 2 * s.n_copies_passed_right
    said = explain(s)
    n = s.n_copies_passed
    assert (f"In {n} of its {s.n_plain_rounds} plain steps auto passed over a copy of earlier text: the target then "
            f"wrote the copy's first token in {s.n_copies_passed_right} of them, and on average "
            f"{s.n_copies_passed_kept / n:.1f} tokens of each copy, and no copy can pay here: every check costs a single-token pass or more per "
            "token it checks.") in said, said
    _fix_costs(pair, monkeypatch, {1: 30, 2: 31, 3: 32, 5: 34, 9: 38, 17: 46, 33: 60}, 60)   # checks nearly free:
    _, _, cheap = run(pair, prompt, GREEDY, max_tokens=32, drafter="lookup", auto=True)     # auto copies
    assert cheap.stats.n_drafted >= 10 and cheap.stats.n_copies_passed < s.n_copies_passed / 2


def test_a_speed_up_from_a_reply_caught_in_a_loop_is_said_to_be_one(pair):
    """A new user's try: the test model, asked for a short poem, wrote one line over and over, and the panel
    said 1.77× plain with nothing about why. A reply that repeats its own text is said to, beside its
    speed-up; a reply that copies its prompt (not itself) is not."""
    loop_prompt = prompt_tokens(pair.target, "<|im_start|>user\nWrite the word apples, followed by a comma, 300 "
                                             "times.<|im_end|>\n<|im_start|>assistant\napples, apples, apples,")
    _, _, looped = run(pair, loop_prompt, GREEDY, max_tokens=128, drafter="lookup", auto=True)
    _, _, copied = run(pair, prompt_tokens(pair.target, REPEAT), GREEDY, max_tokens=32, drafter="lookup", auto=True)
    assert looped.stats.repeated_share > 0.6 and copied.stats.repeated_share < 0.1
    assert looped.stats.n_accepted > 0 and copied.stats.n_accepted > 0

    from desktop_app.engine.explain import PAYS
    from desktop_app.engine.events import GenerationStats

    said = explain(looped.stats)            # (whether this machine's passes made it pay decides whether it is said)
    share = f"{100 * looped.stats.repeated_share:.0f} %"
    sentence = (f"{share} of this reply repeats its own earlier text (each of those tokens ends a run of 8 it had "
                "written before): a reply caught in a loop is easy to draft for, so this speed-up says little of "
                "other replies.")
    assert (sentence in said) == (looped.stats.measured_speedup >= PAYS), said
    assert "repeats its own" not in explain(copied.stats)
    # at 1.5× plain it is said, at 1.0× (no speed-up to account for) not
    loop = dict(n_tokens=100, n_rounds=20, n_drafted=90, n_accepted=80, t_verify_s=10.0, t_plain_pass_s=0.03,
                stop_reason="max_tokens", repeated_share=0.9, mean_drafted=4.5, mean_accepted=4.0, alpha=0.9,
                acceptance_rate=0.89)
    for m in (1.5, 1.0):
        stats = GenerationStats(**loop, tokens_per_s=m / 0.03)
        assert stats.measured_speedup == pytest.approx(m)
        assert ("90 % of this reply repeats its own earlier text" in explain(stats)) == (m >= PAYS)
