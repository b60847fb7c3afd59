"""`tandem generate`: JSON whose per-round data adds up, samples and seeds, exit codes."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.network      # every test here needs a fetched model


def tandem(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "desktop_app", *args], capture_output=True, text=True, timeout=600)


def check_rounds_add_up(sample: dict) -> None:
    emitted = []
    for r in sample["rounds"]:
        kinds = r["kinds"]
        assert kinds.count("accepted") == r["accepted"] <= len(r["drafted"])
        assert kinds.count("accepted") + kinds.count("correction") + kinds.count("bonus") \
            + kinds.count("plain") == len(r["emitted"])
        # a round emits its kept drafts and one token of the target's, unless the reply ended on a kept draft
        assert len(r["emitted"]) == r["accepted"] + (kinds[-1] != "accepted")
        assert kinds[-1] != "accepted" or r.get("end")
        assert r["emitted"][:r["accepted"]] == r["drafted"][:r["accepted"]]
        assert r["t_draft_s"] >= 0 and r["t_verify_s"] > 0
        emitted += r["emitted"]
    assert emitted[:len(sample["tokens"])] == sample["tokens"]
    assert len(emitted) - len(sample["tokens"]) == (sample["rounds"][-1].get("end") == "eos")   # nothing past the end
    stats = sample["stats"]
    assert stats["n_tokens"] == len(sample["tokens"])
    assert stats["n_drafted"] == sum(len(r["drafted"]) for r in sample["rounds"])
    assert stats["n_accepted"] == sum(r["accepted"] for r in sample["rounds"])


def test_generate_json_with_a_draft_model(test_model_path, q2k_draft_path):
    out = tandem("generate", "-m", test_model_path, "-md", q2k_draft_path, "-p", "Write a Python hello world.",
                 "-n", "40", "--draft-max", "5", "--json", "-c", "512")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] and doc["settings"]["drafter"] == "model" and doc["settings"]["draft_max"] == 5
    assert {k: doc["settings"][k] for k in ("n_predict", "stop", "system", "raw")} == {
        "n_predict": 40, "stop": [], "system": None, "raw": False}      # (with the rest, enough to run it again)
    [sample] = doc["samples"]
    check_rounds_add_up(sample)
    # each round names its drafter (auto's model, copy and plain rounds could not be told apart: a user's try)
    assert {r["drafter"] for r in sample["rounds"] if r["drafted"]} == {"model"}
    assert sample["stats"]["n_drafted"] > 0 and 0 <= sample["stats"]["acceptance_rate"] <= 1
    assert sample["text"]
    # the text summary's measured speed-up, which a script's reader looked for and found only the stats' predicted
    # one (a new user's try): the reply's speed over plain decoding's, both as the stats have them
    stats = sample["stats"]
    assert sample["measured_speedup"] == pytest.approx(stats["tokens_per_s"] / sample["plain_tokens_per_s"])
    assert sample["plain_tokens_per_s"] > 0 and "measured_speedup" not in stats


def test_a_reply_in_plain_turns_ends_where_the_model_starts_the_user_s_next(gemma_path):
    """A model with no chat template chats in plain "User:/Assistant:" turns; greedy, gemma3-270m
    answered "2+2 = 4" and went on "User: 2+2 = 4 Assistant: 2+2 = 4 User: …" to the token limit."""
    out = tandem("generate", "-m", gemma_path, "-p", "What is 2+2?", "-n", "40", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    [sample] = doc["samples"]
    assert sample["stats"]["stop_reason"] == "stop_string" and "4" in sample["text"], sample
    assert "\nUser:" in doc["settings"]["stop"]              # (the stop it was not given is named)
    assert "User:" not in sample["text"] and sample["stats"]["n_tokens"] < 40
    assert not sample["text"].endswith("\n")                # (the turns' own blank line is not the reply's)


def test_a_reply_cut_by_a_full_context_marks_its_last_round(test_model_path):
    """--json's rounds end as the window's round strip does: a reply that filled the context has its
    last round marked "context_full" (the mark had been only in the window's history)."""
    out = tandem("generate", "-m", test_model_path, "-p", "Write a long story about a dragon.", "-n", "400",
                 "-c", "256", "--json")
    assert out.returncode == 0, out.stderr
    [sample] = json.loads(out.stdout)["samples"]
    assert sample["stats"]["stop_reason"] == "context_full", sample["stats"]
    assert [r.get("end", "") for r in sample["rounds"]][-2:] == ["", "context_full"]
    check_rounds_add_up(sample)


def test_no_token_limit_as_llama_cpp_takes_it(test_model_path):
    """`-n -1` (llama.cpp's "no limit") said "-n must be at least 1" (a new user's try): the reply runs on
    until the context is full; other numbers below 1 are still refused."""
    out = tandem("generate", "-m", test_model_path, "-p", "Write a long story about a dragon.", "-n", "-1",
                 "-c", "256", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    [sample] = doc["samples"]
    assert sample["stats"]["stop_reason"] == "context_full" and doc["settings"]["n_predict"] == -1
    assert doc["prompt_tokens"] + sample["stats"]["n_tokens"] > 256 - 8, sample["stats"]   # (it filled it)
    refused = tandem("generate", "-m", test_model_path, "-p", "hi", "-n", "-5")
    assert refused.returncode == 2 and refused.stderr == ("tandem: error: -n must be at least 1, or -1: until the "
                                                          "context is full (as in llama.cpp)\n"), refused.stderr


def test_generate_samples_use_consecutive_seeds(test_model_path, q2k_draft_path, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Once upon a time", encoding="utf-8")
    args = ["generate", "-m", test_model_path, "-md", q2k_draft_path, "-f", str(prompt), "--raw",
            "--temp", "1", "-n", "12", "--json", "-c", "512"]
    many = json.loads(tandem(*args, "--seed", "7", "--samples", "3").stdout)
    assert [s["seed"] for s in many["samples"]] == [7, 8, 9]
    for s in many["samples"]:
        check_rounds_add_up(s)
    one = json.loads(tandem(*args, "--seed", "8").stdout)
    assert one["samples"][0]["tokens"] == many["samples"][1]["tokens"]


def test_samples_in_text_are_parted_on_stdout_and_a_prompt_comes_from_standard_input(test_model_path):
    """Each sample's text follows a line naming it on stdout (the names went to stderr, and the texts ran
    together in a file: a new user's try); -f - reads the prompt from standard input, as llama.cpp's
    does not, which said "cannot read the prompt file -"."""
    args = ["generate", "-m", test_model_path, "-f", "-", "-n", "8", "--temp", "0.8", "-c", "512", "-t", "1", "--seed"]
    out = subprocess.run([sys.executable, "-m", "desktop_app", *args, "5", "--samples", "2"], input="Name a fruit.",
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "[sample 1/2, seed 5]" and "[sample 2/2, seed 6]" in lines[2:], out.stdout
    second = out.stdout.split("[sample 2/2, seed 6]\n")[1]
    one = subprocess.run([sys.executable, "-m", "desktop_app", *args, "6"], input="Name a fruit.",
                         capture_output=True, text=True, timeout=600)
    assert one.returncode == 0 and one.stdout == second and second.strip(), (one.stdout, second)   # (the same sample)
    assert "note:" not in out.stderr
    greedy = tandem("generate", "-m", test_model_path, "-p", "hi", "-n", "2", "--samples", "3")   # (three alike
    assert greedy.returncode == 0 and greedy.stderr.startswith(                                   # said nothing)
        "note: --samples 3 at --temp 0 (greedy): every sample is the same text\n"), greedy.stderr


def test_a_draft_length_that_cannot_apply_is_said_to_do_nothing(test_model_path):
    out = tandem("generate", "-m", test_model_path, "-p", "hi", "--drafter", "none", "--draft-max", "4", "-n", "2")
    assert out.returncode == 0 and out.stderr.startswith(
        "note: --draft-max does nothing with --drafter none: every token is a plain step\n"), out.stderr
    out = tandem("generate", "-m", test_model_path, "-p", "hi", "--auto", "--draft-max", "8", "-n", "2")
    assert out.returncode == 0 and out.stderr.startswith(
        "note: --draft-max does nothing with --auto: auto chooses γ from 0 to 32 each round\n"), out.stderr


def test_a_pair_that_cannot_pair_gets_no_advice_to_swap_them(test_model_path, gemma_path):
    """gemma3-270m as the draft of SmolLM2-135M is larger and cannot pair: "swap -m and -md" came first,
    and swapped they cannot pair either (a new user's try). The load's error says what to do."""
    out = tandem("generate", "-m", test_model_path, "-md", gemma_path, "-p", "hi", "-n", "2")
    assert out.returncode == 1 and out.stderr.startswith("tandem: error: ") and "swap" not in out.stderr, out.stderr
    assert "cannot draft for" in out.stderr and out.stderr.count("\n") == 1


def test_generate_plain_text_output_and_auto_default_without_a_draft_model(test_model_path):
    out = tandem("generate", "-m", test_model_path, "-p", "Say hello.", "-n", "8", "-c", "512")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
    assert "tokens" in out.stderr and "tok/s" in out.stderr
    assert "auto's rounds" in out.stderr                 # a target alone runs auto, as in the window
    fixed = tandem("generate", "-m", test_model_path, "-p", "Say hello.", "-n", "8", "-c", "512", "--json",
                   "--drafter", "lookup")
    assert fixed.returncode == 0, fixed.stderr
    settings = json.loads(fixed.stdout)["settings"]
    assert (settings["drafter"], settings["draft_max"], settings["auto"]) == ("lookup", 4, False)   # named: fixed γ
    gamma = tandem("generate", "-m", test_model_path, "-p", "Say hello.", "-n", "8", "-c", "512", "--json",
                   "--draft-max", "6")
    assert gamma.returncode == 0, gamma.stderr
    settings = json.loads(gamma.stdout)["settings"]
    assert (settings["drafter"], settings["draft_max"], settings["auto"]) == ("lookup", 6, False)   # a γ asked for


def test_generate_exit_codes(test_model_path, gemma_path, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    out = tandem("generate", "-m", str(bad), "-p", "hi", "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"] == f"target model {bad}: not a GGUF file (it does not start with the GGUF signature)"
    out = tandem("generate", "-m", test_model_path, "-md", str(tmp_path / "gone.gguf"), "-p", "hi")
    assert out.returncode == 1 and f"tandem: error: draft model {tmp_path / 'gone.gguf'}: file not found" in out.stderr
    out = tandem("generate", "-m", test_model_path, "-md", gemma_path, "-p", "hi")
    assert out.returncode == 1 and "cannot draft for" in out.stderr and "the draft's tokenizer is llama-spm, the target's gpt2" in out.stderr
    assert out.stderr.endswith(" — choose a draft made for this target, or leave out -md to use the target alone\n")
    out = tandem("generate", "-m", test_model_path, "--drafter", "model", "-p", "hi")
    assert out.returncode == 2 and "needs a draft model" in out.stderr
    out = tandem("generate", "-m", test_model_path, "--draft-max", "40", "-p", "hi")
    assert out.returncode == 2 and "--draft-max must be between 1 and 32, not 40" in out.stderr
    out = tandem("generate", "-m", test_model_path)
    assert out.returncode == 2                       # no prompt: argparse usage error


def test_generate_auto_says_what_it_chose(test_model_path, q2k_draft_path):
    import re

    out = tandem("generate", "-m", test_model_path, "-md", q2k_draft_path, "--auto", "-p",
                 "Repeat exactly: one two three four five six seven eight.", "-n", "24", "-c", "512")
    assert out.returncode == 0, out.stderr
    said = re.search(r"(\d+) tokens(?: \+ end)?, .*; auto's rounds: ((?:\d+ (?:draft model|lookup|plain)(?:, )?)+)$",
                     out.stderr, re.M)
    assert said, out.stderr
    # the measured speed-up first, the sentences that say why each on a line of its own (all of it on one line,
    # auto's ran to 900 characters with the speed-up at its end: a new user's try)
    assert re.match(r"\d+ tokens(?: \+ end)?, [\d.]+ tok/s, measured [\d.]+x plain decoding \(plain ",
                    said.group(0)), out.stderr
    counts = [int(n) for n in re.findall(r"\d+", said.group(2))]
    assert 1 <= sum(counts) <= int(said.group(1)) + 1   # every round adds a token (the last may add only the end)
    # a draft model left unused is explained, as in the window (it printed the counts alone: a new user's try)
    assert ("\n  Auto did not draft with the draft model: " in out.stderr) != ("draft model" in said.group(2)), out.stderr
    # with --drafter lookup, auto weighs copies alone (as --help says): the draft model is left out, unweighed
    copies = tandem("generate", "-m", test_model_path, "-md", q2k_draft_path, "--auto", "--drafter", "lookup", "-p",
                    "Repeat exactly: one two three four five six seven eight.", "-n", "24", "-c", "512")
    said = re.search(r"; auto's rounds: ((?:\d+ (?:draft model|lookup|plain)(?:, )?)+)", copies.stderr)
    assert copies.returncode == 0 and said and "draft model" not in said.group(1), copies.stderr
    assert "did not draft with the draft model" not in copies.stderr


def test_generate_text_summary_names_the_seed_and_adds_up(test_model_path, q2k_draft_path):
    """A sampled reply's summary says its seed (else it cannot be reproduced), and its rounds: kept
    drafts plus one token a round are the reply's tokens, but for the end (the end-of-reply token is not
    counted, and where it was a kept draft its round added no token of the target's)."""
    import re

    out = tandem("generate", "-m", test_model_path, "-md", q2k_draft_path, "-p", "Count from one to twenty.",
                 "-n", "24", "-c", "512", "--temp", "0.8", "--seed", "-1")
    assert out.returncode == 0, out.stderr
    seed = int(re.search(r"; seed (\d+);", out.stderr).group(1))
    again = tandem("generate", "-m", test_model_path, "-md", q2k_draft_path, "-p", "Count from one to twenty.",
                   "-n", "24", "-c", "512", "--temp", "0.8", "--seed", str(seed))
    assert again.stdout == out.stdout                      # the seed reported reproduces the reply
    said = re.search(r"(\d+) tokens?( \+ end)?, .*kept (\d+)/\d+ drafted.*; rounds \(draft model, γ 4\): (\d+) drafted, (\d+) plain$",
                     out.stderr, re.M)
    assert said, out.stderr
    tokens, end, kept, drafted, plain = said.groups()
    tokens, kept, drafted, plain = map(int, (tokens, kept, drafted, plain))
    ended = "stopped by its end (the model's end token)" in out.stderr
    assert bool(end) == ended                              # the end the rounds wrote is said, as in the window
    hi = tandem("generate", "-m", test_model_path, "-md", q2k_draft_path, "-p", "Say hi.", "-n", "64", "-c", "512")
    assert re.search(r"^\d+ tokens \+ end, .*; stopped by its end \(the model's end token\);", hi.stderr, re.M), hi.stderr
    cut = tandem("generate", "-m", test_model_path, "-md", q2k_draft_path, "-p", "Say hi.", "-n", "64", "-c", "512",
                 "--stop", hi.stdout.split()[0])       # a stop string at its first word: "1 token" under an empty line
    assert "; stopped by a stop string (its tokens counted, not printed);" in cut.stderr, (hi.stdout, cut.stderr)
    assert kept + drafted + plain in ((tokens + 1, tokens + 2) if ended else (tokens,)), out.stderr
    many = tandem("generate", "-m", test_model_path, "-p", "Say hi.", "-n", "6", "-c", "512", "--temp", "0.8",
                  "--seed", "3", "--samples", "2")
    assert "[sample 1/2, seed 3]" in many.stdout and "[sample 2/2, seed 4]" in many.stdout, many.stdout   # (on stdout: parted)
    greedy = tandem("generate", "-m", test_model_path, "-p", "Say hi.", "-n", "6", "-c", "512")
    assert "seed" not in greedy.stderr                     # greedy decoding draws on no seed
    assert "; stopped by the token limit (-n 6);" in greedy.stderr, greedy.stderr   # (in words: it said "stop: max_tokens")
    plain = tandem("generate", "-m", test_model_path, "-p", "Say hi.", "-n", "6", "-c", "512", "--drafter", "none")
    assert re.search("; plain decoding$", plain.stderr, re.M), plain.stderr   # the setting it ran with is named, as the window's footer
                                                           # names it (generate's defaults are not the window's)


@pytest.mark.parametrize("after_s, presses", [(1.0, 1), (2.5, 1), (5.0, 1), (1.5, 2)])
def test_ctrl_c_at_any_point_stops_with_one_line(test_model_path, q2k_draft_path, after_s, presses):
    """Ctrl-C while the command starts, loads, times the machine or generates (once, or twice in a
    row): exit 130 and one line, with --json a document saying so; never a traceback, and never
    ignored (a Ctrl-C that reached llama.cpp's log callback was dropped, and the whole reply was
    generated)."""
    import signal
    import time

    # (as from a terminal: a job that a script started in the background inherits Ctrl-C ignored, and keeps
    # ignoring it, as it should; `.ci/run` runs so)
    proc = subprocess.Popen([sys.executable, "-m", "desktop_app", "generate", "-m", test_model_path, "-md",
                             q2k_draft_path, "--raw", "-p", "1, 2, 3, 4, 5, 6, 7, 8,", "-n", "3000",
                             "-c", "4096", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(after_s)
    if proc.poll() is not None:                    # (a machine fast enough to finish first: nothing to stop)
        proc.communicate()
        pytest.skip(f"the reply was done within {after_s} s")
    for _ in range(presses):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.1)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, (out, err)      # (a second press, once the command has stopped, is ignored)
    assert err.count("tandem: error: interrupted") == 1, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert json.loads(out) == {"ok": False, "error": "interrupted"}


def test_the_context_notes_write_a_size_alike(capsys, test_model_path):
    """-c 200000 printed "the context holds 200192 tokens" and then "200,192" (a new user's try)."""
    from desktop_app.commands.checks import ctx_note

    ctx_note(200000, 200192, test_model_path)
    notes = capsys.readouterr().err.splitlines()
    assert len(notes) == 2 and all("the context holds 200,192 tokens" in n for n in notes), notes
