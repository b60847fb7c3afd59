"""Command-line input (issue #12, item 9): every bad value is one line on stderr, a non-zero exit and,
with --json, a {"ok": false, "error": ...} document, found before any model loads; values llama.cpp
gives a meaning (--seed -1, -t 0 or below, --top-k 0 or below, --temp 0 or below) mean the same here."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from desktop_app.engine.threads import physical_cores

MISSING = "/nonexistent/model.gguf"       # the checks must come before any model is looked at


def tandem(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "desktop_app", *args], capture_output=True, text=True,
                          errors="backslashreplace", timeout=timeout)


def usage_error(out: subprocess.CompletedProcess, json_doc: bool = True) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("tandem: error: ")
    message = out.stderr[len("tandem: error: "):].rstrip("\n")
    if json_doc:
        assert json.loads(out.stdout) == {"ok": False, "error": message}
    else:
        assert out.stdout == ""
    assert "model.gguf" not in message and "file not found" not in message
    return message


GENERATE_ERRORS = {
    # the inputs that gave a traceback (with a real model) or were accepted unchecked
    "--min-p 1.5": (["-p", "hi", "--min-p", "1.5", "--temp", "1"], "--min-p must be between 0 and 1, not 1.5"),
    "invalid UTF-8 in -p": ([b"-p", b"caf\xe9 \xff"], "the prompt (-p) is not valid UTF-8 text"),
    "invalid UTF-8 in --system": (["-p", "hi", b"--system", b"\xc3("], "--system is not valid UTF-8 text"),
    "empty raw prompt": (["-p", "", "--raw"], "the prompt is empty"),
    "blank chat prompt": (["-p", "  \n "], "the prompt is empty"),      # (the window sends no such message)
    "--temp nan": (["-p", "hi", "--temp", "nan"], "--temp must be a finite number (0 or below: greedy), not nan"),
    "--temp inf": (["-p", "hi", "--temp", "inf"], "--temp must be a finite number (0 or below: greedy), not inf"),
    "--top-p 1.5": (["-p", "hi", "--top-p", "1.5"], "--top-p must be between 0 and 1, not 1.5"),
    "--top-p -0.5": (["-p", "hi", "--top-p", "-0.5"], "--top-p must be between 0 and 1, not -0.5"),
    "--min-p nan": (["-p", "hi", "--min-p", "nan"], "--min-p must be between 0 and 1, not nan"),
    "--seed -2": (["-p", "hi", "--seed", "-2"],
                  "--seed must be -1 (random, as in llama.cpp) or between 0 and 4294967295, not -2"),
    "--seed 2^32": (["-p", "hi", "--seed", str(2**32)], "--seed must be -1 (random, as in llama.cpp) or between"),
    "-c -5": (["-p", "hi", "-c", "-5"], "-c must be 0 (the model's own context length, as in llama.cpp) or a "
                                        "number of tokens, not -5"),
    "--draft-p-min nan": (["-p", "hi", "--draft-p-min", "nan"], "--draft-p-min must be at least 0 and below 1, not nan"),
    "--draft-max 0": (["-p", "hi", "--draft-max", "0"], "--draft-max must be between 1 and 32, not 0"),   # (it said
    "--draft-min 10": (["-p", "hi", "--draft-min", "10"], "--draft-min must be between 0 and --draft-max (4), "  # "draft
                                                          "not 10"),                                             # max")
    "missing prompt file": (["-f", "/nonexistent/prompt.txt"],
                            "cannot read the prompt file /nonexistent/prompt.txt: No such file or directory"),
    "not an int": (["-p", "hi", "--seed", "abc"], "argument --seed: invalid int value: 'abc' (see tandem generate -h)"),
    "no prompt": ([], "one of the arguments -p/--prompt -f/--prompt-file is required (see tandem generate -h)"),
    "an unknown flag": (["-p", "hi", "--bogus"], "unrecognized arguments: --bogus (see tandem generate -h)"),  # (it
}                                                                                                 # said "tandem -h")


@pytest.mark.parametrize("case", list(GENERATE_ERRORS))
def test_generate_refuses_bad_input_before_loading_a_model(case):
    args, says = GENERATE_ERRORS[case]
    message = usage_error(tandem("generate", "-m", MISSING, "--json", *args))
    assert message.startswith(says) or message == says, message


def test_a_prompt_file_that_is_not_utf8_is_refused_before_loading(tmp_path):
    prompt = tmp_path / "latin1.txt"
    prompt.write_bytes("café".encode("latin-1"))
    message = usage_error(tandem("generate", "-m", MISSING, "-f", str(prompt)), json_doc=False)
    assert message == f"cannot read the prompt file {prompt}: it is not UTF-8 text"


def test_errors_without_json_are_one_line_and_nothing_on_stdout():
    assert usage_error(tandem("generate", "-m", MISSING, "-p", "hi", "--seed", "x"), json_doc=False)
    assert usage_error(tandem("models", "fetch"), json_doc=False) == ("the following arguments are required: NAME "
                                                                      "(see tandem models fetch -h)")
    assert usage_error(tandem("models", "list", "--bogus"), json_doc=False) == ("unrecognized arguments: --bogus "
                                                                                "(see tandem models list -h)")
    assert usage_error(tandem("--bogus"), json_doc=False) == "unrecognized arguments: --bogus (see tandem -h)"


def test_models_alone_lists_them_and_an_unknown_key_is_named_as_such(tmp_path, test_model_path):
    out = subprocess.run([sys.executable, "-m", "desktop_app", "models"], capture_output=True, text=True,
                         env={**os.environ, "TANDEM_MODELS_DIR": str(tmp_path)}, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith(f"models folder: {tmp_path}"), out
    out = tandem("generate", "-m", "qwen2.5-coder-7b", "-p", "hi")
    assert out.returncode == 1 and out.stderr == ("tandem: error: target model qwen2.5-coder-7b: no such file, and not a "
                                                  "catalogue key (smollm2-135m, qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, "
                                                  "gemma3-270m; tandem models list)\n"), out.stderr
    # which of -m and -md it was, as a missing path's message says ("nosuch: no such file" named neither)
    out = tandem("generate", "-m", test_model_path, "-md", "nosuch", "-p", "hi")
    assert out.returncode == 1 and out.stderr.startswith("tandem: error: draft model nosuch: no such file"), out.stderr
    out = tandem("bench", "-m", test_model_path, "-md", "nosuch")
    assert out.returncode == 1 and out.stderr.startswith("tandem: error: draft model nosuch: no such file"), out.stderr


@pytest.mark.parametrize("args, says", [
    (["--temp", "0,nan"], "--temp must be a finite number"),
    (["--seed", "-7"], "--seed must be -1 (random, as in llama.cpp)"),
    (["-c", "-1"], "-c must be 0"),
    (["--repeat", "0"], "-n and --repeat must be at least 1"),
    (["--json", "/nonexistent/dir/bench.json"], "--json /nonexistent/dir/bench.json: cannot be written "
                                                "(No such file or directory)"),
    (["--plot", "/"], "--plot /: cannot be written (Is a directory)"),
    (["--drafter", "model"], "--drafter model needs a draft model (-md DRAFT)"),   # (it ran plain decoding alone)
    # (Python's "invalid literal for int() with base 10: 'abc'", naming no flag: a new user's try)
    (["--draft-max", "4,abc"], "--draft-max takes a whole number or a comma-separated list of them, not 'abc'"),
    (["--temp", "0.5,abc"], "--temp takes a number or a comma-separated list of them, not 'abc'"),
    (["--draft-max", "0,4"], "--draft-max values must be between 1 and 32, not 0"),
])
def test_bench_refuses_bad_input_before_loading_a_model(args, says):
    message = usage_error(tandem("bench", "-m", MISSING, *args), json_doc="--json" in args)
    assert message.startswith(says), message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 and Wayland sessions are Linux's")
def test_the_window_without_a_display_says_so_in_one_line():
    """Over SSH, `tandem` aborted inside Qt (SIGABRT) with "Reinstalling the application may fix this
    problem" (a new user's try)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    for args in ([], ["gui"]):
        out = subprocess.run([sys.executable, "-m", "desktop_app", *args], capture_output=True, text=True, env=env,
                             timeout=300)
        assert out.returncode == 1 and out.stdout == "", out
        assert out.stderr == ("tandem: error: no display to open the window on (neither DISPLAY nor WAYLAND_DISPLAY "
                              "is set): run tandem from a desktop session, or chat on the command line: tandem "
                              "generate -m MODEL -p TEXT\n"), out.stderr


def test_the_window_takes_llama_cpp_s_context_and_thread_flags():
    """`tandem -m MODEL -c 256` said "invalid choice: '256' (choose from 'gui', 'generate', …)" (a new user's
    try): the window takes -c and -t as Settings' Context size and Threads, and says what -c it can hold."""
    from desktop_app.cli import build_parser

    parse = build_parser().parse_args
    for argv in (["-m", "x", "-c", "512", "-t", "2"], ["gui", "-m", "x", "-c", "512", "-t", "2"],
                 ["-m", "x", "-c", "512", "-t", "2", "gui"]):     # (before `gui`, the subcommand's own
        args = parse(argv)                                        # defaults overwrote them: a review found)
        assert (args.target, args.ctx_size, args.threads) == ("x", 512, 2), argv
    assert (parse(["generate", "-m", "x", "-p", "hi"]).ctx_size, parse(["gui"]).ctx_size) == (4096, None)
    for bad, says in ((["-m", MISSING, "-c", "100"], "-c must be 256 to 131072 tokens in the window"),
                      (["-m", MISSING, "-t", "-1"], "-t must be 0 (automatic) or a number of threads up to 256, not -1"),
                      (["-m", MISSING, "-t", "999"], "-t must be 0 (automatic) or a number of threads up to 256, not 999"),
                      (["--server", "http://127.0.0.1:9", "-c", "512"], "-c and -t set how models load here; a "
                                                                          "llama-server sets its own"),
                      # before another command they would be dropped for its defaults (4096): refused
                      (["-c", "512", "generate", "-m", MISSING, "-p", "hi"], "options go after the command: "
                                                                              "tandem generate -c 512 …")):
        out = subprocess.run([sys.executable, "-m", "desktop_app", *bad], capture_output=True, text=True, timeout=300)
        assert out.returncode == 2 and out.stderr.startswith(f"tandem: error: {says}"), out


def test_llama_cpp_s_names_for_the_token_limit_and_the_system_prompt():
    from desktop_app.cli import build_parser

    gen = build_parser().parse_args(["generate", "-m", "x", "-p", "hi", "--n-predict", "5", "-sys", "Be brief."])
    assert gen.max_tokens == 5 and gen.system == "Be brief."
    assert build_parser().parse_args(["generate", "-m", "x", "-p", "hi", "--system-prompt", "S"]).system == "S"
    assert build_parser().parse_args(["bench", "-m", "x", "--n-predict", "7"]).n_tokens == 7


def test_bench_names_a_prompts_file_it_cannot_use(tmp_path):
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\n")
    (tmp_path / "broken.json").write_text("[1,", encoding="utf-8")
    (tmp_path / "object.json").write_text('{"a": 1}', encoding="utf-8")
    for name, says in [("gone.txt", "cannot read the prompts file {}: No such file or directory"),
                       ("latin1.txt", "cannot read the prompts file {}: it is not UTF-8 text"),
                       ("broken.json", "the prompts file {} is not valid JSON"),
                       ("object.json", "the prompts file {} must hold a list of prompts")]:
        message = usage_error(tandem("bench", "-m", MISSING, "--prompts", str(tmp_path / name)), json_doc=False)
        assert message.startswith(says.format(tmp_path / name)), message


# -- with the real test model

@pytest.mark.network
def test_llama_cpp_conventions_and_values_it_would_not_take(test_model_path):
    """--seed -1 is random, -t 0 or below automatic threads, --top-k and --temp 0 or below off and greedy; -t 1000
    (it used to start 1000 threads and crawl) is capped and -c 64 (raised silently) is said."""
    first = tandem("generate", "-m", test_model_path, "-p", "Say hi.", "-n", "4", "--json", "--seed", "-1",
                   "-t", "1000", "-c", "64", "--top-k", "-1", "--temp", "-2", timeout=120)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["settings"]["threads"] == os.cpu_count() and doc["settings"]["n_ctx"] == 256
    assert doc["settings"]["threads_follow_load"] is False            # (a count given is kept)
    assert (doc["settings"]["top_k"], doc["settings"]["temp"]) == (0, 0.0)
    assert f"note: -t 1000: this machine has {os.cpu_count()} CPUs; using {os.cpu_count()} threads" in first.stderr
    assert "note: -c 64: the context holds 256 tokens" in first.stderr
    second = tandem("generate", "-m", test_model_path, "-p", "Say hi.", "-n", "4", "--json", "--seed", "-1",
                    "-t", "-1", "--temp", "1")
    assert second.returncode == 0, second.stderr
    doc2 = json.loads(second.stdout)
    assert doc2["settings"]["threads"] == physical_cores() and doc2["settings"]["threads_follow_load"] is True
    seeds = [doc["samples"][0]["seed"], doc2["samples"][0]["seed"]]
    assert all(0 <= s < 2**32 for s in seeds) and seeds[0] != seeds[1]
    from desktop_app.machine import llama_build

    offload = tandem("generate", "-m", test_model_path, "-p", "Say hi.", "-n", "2", "-ngl", "5", timeout=120)
    assert offload.returncode == 0, offload.stderr
    said = "note: -ngl 5: this llama.cpp build has no GPU offload (tandem doctor), so every layer runs on the CPU"
    assert (said in offload.stderr) == (not llama_build()["gpu_offload"]), offload.stderr
    assert "trained on" not in first.stderr + second.stderr + offload.stderr
    past = tandem("generate", "-m", test_model_path, "-p", "Say hi.", "-n", "2", "-c", "16384", timeout=120)
    assert past.returncode == 0 and ("note: -c 16384: the context holds 16,384 tokens, beyond the 8,192 the model "
                                     "was trained on: text past that may come out garbled\n") in past.stderr, past.stderr


@pytest.mark.network
def test_a_prompt_longer_than_the_context_fails_with_a_message(test_model_path):
    out = tandem("generate", "-m", test_model_path, "-p", "word " * 400, "-c", "256", "--raw", "--json")
    assert out.returncode == 1, out.stderr
    error = json.loads(out.stdout)["error"]
    assert re.match(r"the prompt has (\d+) tokens and the context holds 256, which leaves no room for a reply: "
                    r"shorten the prompt or raise -c$", error), error
    assert int(error.split()[3]) > 256
    assert out.stderr.strip() == f"tandem: error: {error}"
