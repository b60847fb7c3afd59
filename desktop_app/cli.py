"""The `tandem` command: `gui` (default), `generate`, `bench`, `models`, `doctor`."""
from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys

from desktop_app import bundle
from desktop_app.models.catalogue import MODELS, SETS       # (names only: no llama.cpp)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors read like every other command-line error: one line on stderr, exit code
    2, and with --json on the command line a {"ok": false, "error": ...} document on stdout."""

    def __init__(self, *args, json_errors: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.json_errors = json_errors

    def error(self, message: str):
        from desktop_app.commands.output import EXIT_USAGE, fail

        sys.exit(fail(argparse.Namespace(json=self.json_errors), f"{message} (see {self.prog} -h)", EXIT_USAGE))


def _run(command: str, args: argparse.Namespace) -> int:
    """Import a command's module only when it runs (so `tandem models` never loads llama.cpp)."""
    return importlib.import_module(f"desktop_app.commands.{command}").run(args)


GENERATE_SUMMARY = """\
The reply goes to stdout; its numbers to stderr, one line each reply, then the window's sentences on
why (what auto passed over, a draft model left unused, …), each on a line of its own:
  tokens, tok/s          the reply's length ("+ end": and its end-of-reply token, which no count here
                         includes) and speed (the prompt's pass left out), the measured speed-up (below),
                         and the time to its first token; stopped by: why it ended; seed: the one a
                         sampled reply drew on
  kept K/D drafted       drafted tokens the target kept (a draft ends at its first rejected token)
  α                      the chance a drafted token is kept when the ones before it were:
                         kept / (kept + rejections), the α of the paper's E = (1 - α^(γ+1)) / (1 - α)
  kept per drafted round kept drafted tokens per round that drafted; each round adds one of the
                         target's own, so kept + rounds = tokens (and 1 for "+ end"), but a round whose
                         kept drafts end the reply adds no token of the target's
  draft / target         seconds spent drafting, and in the target's passes (checking drafts, and the
                         plain steps)
  c                      one draft-model step's cost, in single-token target passes (not for copies)
  predicted speed-up     from those numbers: with verify passes priced as this machine's timings put
                         them (as multiples of a single pass, at this reply's pace), and as if a check
                         cost one single-token pass (the paper's flat cost)
  rounds (SETTING)       rounds that drafted and rounds decoded plainly, with the drafter and γ they
                         ran at (with --auto: by drafter; "plain decoding" with --drafter none)
  measured Nx plain      this reply's speed against plain decoding, timed on its plain rounds, or
                         before it where it had none (at load, or by the last reply in the window); a
                         pass slows as the context grows, so the tokens of rounds that drafted are
                         priced at a pass as slow as the checks around them show it
On a terminal the reply's text is coloured by who wrote each token: green, a draft the target kept;
yellow, the target's correction of a rejected draft (orange in the window); blue, its bonus token
after a draft kept whole; uncoloured, a plain step (NO_COLOR=1 turns colour off).
"""


def _add_repack_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-repack", action="store_true",
                   help="load weights without repacking them for faster CPU kernels (as llama.cpp's --no-repack; "
                        "also TANDEM_NO_REPACK=1): for CPUs where repacking crashes, llama.cpp issue #20824")


def _add_gpu_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-ngl", "--gpu-layers", type=int, default=None, help="target layers offloaded to a GPU or to "
                   "the --rpc servers (needs a llama-cpp-python built for one; 99: all; default 0, with --rpc 99)")
    p.add_argument("-ngld", "--gpu-layers-draft", type=int, default=None, help="draft layers offloaded likewise")
    p.add_argument("--rpc", metavar="HOST:PORT[,...]", help="run the offloaded layers on llama.cpp ggml-rpc-server "
                   "machines (experimental; unauthenticated: trusted networks only)")


def _add_server_options(p: argparse.ArgumentParser,
                        what: str = "chat through a running llama-server instead of local models (its speculation "
                                    "is set when it starts; rounds are rebuilt from its timings)") -> None:
    p.add_argument("--server", metavar="URL", help=what)
    p.add_argument("--api-key", metavar="KEY", default=None, help="llama-server's API key (also TANDEM_API_KEY)")


def _add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--model", dest="target", metavar="TARGET", help="target GGUF file, or a catalogue key "
                   "(tandem models list); needed unless --server")
    p.add_argument("-md", "--model-draft", dest="draft", metavar="DRAFT", help="draft GGUF file, or a catalogue key")
    p.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default, or 0: automatic: one per "
                   "performance core, fewer while other work keeps the CPUs busy)")
    p.add_argument("-c", "--ctx-size", type=int, default=4096, help="context size in tokens (default 4096)")
    _add_gpu_options(p)
    _add_repack_option(p)


def _add_spec_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drafter", choices=["model", "lookup", "none"], default=None,
                   help="what drafts: the draft model (default with -md), prompt lookup at a fixed γ, none; "
                   "without -md, this or --draft-max, auto mode copies by prompt lookup where that pays")
    p.add_argument("--draft-max", type=int, default=None, metavar="N", help="draft length γ, 1-32 (default 4); "
                   "without -md it asks for prompt lookup at this γ")
    p.add_argument("--draft-min", type=int, default=0, metavar="N", help="drop drafts shorter than this (not one "
                   "that ends at an end-of-generation token; default 0)")
    p.add_argument("--draft-p-min", type=float, default=0.0, metavar="P",
                   help="stop drafting when the draft's top probability is below P (default 0: never)")
    p.add_argument("--auto", action="store_true", help="choose the drafter and γ (0-32, whatever --draft-max says) "
                   "each round from this machine's measured costs and the acceptance seen so far; a draft model "
                   "reads the prompt only once auto first drafts with it. With --drafter lookup auto weighs copies "
                   "alone (a draft model loaded is left out), with --drafter none it decodes plainly")


def _add_sampling_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temp", type=float, default=0.0, help="temperature; 0 or below is greedy, as in llama.cpp (default 0; at a near-tie, a "
                                                            "batched check can choose otherwise than a plain step)")
    p.add_argument("--top-k", type=int, default=40, help="sample among the K likeliest tokens; 0 or below: all (default 40)")
    p.add_argument("--top-p", type=float, default=0.95, help="... among the likeliest tokens that together hold "
                   "probability P; 1: off (default 0.95)")
    p.add_argument("--min-p", type=float, default=0.05, help="... leaving out tokens below P times the likeliest "
                   "one's probability; 0: off (default 0.05)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: a random one, reported)")


def _add_gui_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--demo", action="store_true", help="open with the demo pair (fetched on first run)")
    p.add_argument("-m", "--model", dest="target", metavar="TARGET", help="target GGUF file or catalogue key")
    p.add_argument("-md", "--model-draft", dest="draft", metavar="DRAFT", help="draft GGUF file or catalogue key")
    p.add_argument("-c", "--ctx-size", type=int, metavar="N", help="context size in tokens, "
                   "256-131072: Settings' Context size, set there as if typed (default: as it was left, 4096 at first)")
    p.add_argument("-t", "--threads", type=int, metavar="N", help="CPU threads: Settings' Threads, "
                   "likewise (0: automatic)")
    p.add_argument("--server", metavar="URL", help="open connected to a running llama-server")
    p.add_argument("--api-key", metavar="KEY", help="its API key (also TANDEM_API_KEY)")
    p.add_argument("--prompt", help=argparse.SUPPRESS)        # with --screenshot: for docs and tests
    p.add_argument("--screenshot", metavar="PNG", help=argparse.SUPPRESS)   # (once loaded, send a test message,
                                                                            # save a screenshot after the reply, quit)
    _add_repack_option(p)


def build_parser(json_errors: bool = False) -> argparse.ArgumentParser:
    parser_class = functools.partial(_Parser, json_errors=json_errors)
    parser = parser_class(prog="tandem", description="Local chat sped up by speculative decoding. "
                                                     "Without a command, opens the window.")
    parser.add_argument("--version", action=bundle.VersionAction, help="print the version (and the bundle's build) and exit")
    _add_gui_options(parser)
    sub = parser.add_subparsers(dest="command", parser_class=parser_class)

    p_gui = sub.add_parser("gui", help="open the window (the default)",   # (its defaults are the main parser's:
                           argument_default=argparse.SUPPRESS)          # `tandem -c 512 gui` kept 512 no more)
    _add_gui_options(p_gui)
    p_gui.set_defaults(func=lambda a: _run("gui", a))

    p_gen = sub.add_parser("generate", help="generate text from a prompt and report every round",
                           formatter_class=argparse.RawDescriptionHelpFormatter, epilog=GENERATE_SUMMARY)
    _add_model_options(p_gen)
    _add_server_options(p_gen)
    _add_spec_options(p_gen)
    _add_sampling_options(p_gen)
    p_gen.add_argument("-n", "--max-tokens", "--n-predict", dest="max_tokens", type=int, default=256, metavar="N",
                       help="tokens to generate at most (default 256; -1: until the context is full, as in llama.cpp)")
    p_gen.add_argument("--samples", type=int, default=1, metavar="K", help="K completions, with seeds S, S+1, ... "
                       "from --seed S (each sample's text follows a [sample k/K] line, with its seed where it samples)")
    p_gen.add_argument("-sys", "--system-prompt", "--system", dest="system", default=None, metavar="TEXT",
                       help="system prompt (with --raw: put before the prompt, a blank line between)")
    src = p_gen.add_mutually_exclusive_group(required=True)
    src.add_argument("-p", "--prompt", metavar="TEXT", help="the message to answer (with --raw: the text to go on)")
    src.add_argument("-f", "--prompt-file", metavar="FILE", help="... read from FILE (-: standard input)")
    p_gen.add_argument("--raw", action="store_true", help="send the prompt as plain text, no chat template")
    p_gen.add_argument("--stop", action="append", default=[], metavar="TEXT", help="stop string (repeatable)")
    p_gen.add_argument("--json", action="store_true", help="print one JSON document with every round")
    p_gen.set_defaults(func=lambda a: _run("generate", a))

    p_bench = sub.add_parser("bench", help="measure plain against speculative decoding, interleaved",
                             description="Measure plain decoding against speculative decoding on this machine: "
                             "each prompt is run with every setting (drafter × draft length × temperature), "
                             "with a plain run between them, and the table gives each setting's tokens/s, "
                             "time to first token and speed-up over the plain runs beside it, so that a slow "
                             "spell of a shared machine falls on both. With --replay, auto is also judged "
                             "in replay under cost profiles of other machines: steep (a 2-core AMD EPYC, a "
                             "17-token check costing about 9 single passes), xeon (a 2-core Intel Xeon, 3.7 passes), "
                             "avx2 (a 2-core AMD EPYC 7003: 8.6 passes, but fewer than steep for short checks), "
                             "gpu (checks of up to 17 tokens costing 1.1–1.5 passes), h200 (an NVIDIA H200, "
                             "measured: 2.4 passes) and here (this machine, as measured).")
    p_bench.add_argument("-m", "--model", dest="target", required=True, metavar="TARGET",
                         help="target GGUF file or catalogue key")
    p_bench.add_argument("-md", "--model-draft", dest="draft", metavar="DRAFT", help="draft GGUF file or catalogue key")
    p_bench.add_argument("--prompts", default="builtin", metavar="FILE|builtin",
                         help="a .json list or a text file with prompts separated by '---' lines (default: builtin)")
    p_bench.add_argument("--drafter", default=None, metavar="LIST", help="model, lookup (default: both with -md, "
                         "lookup without)")
    p_bench.add_argument("--draft-max", default="2,4,8", metavar="LIST", help="draft lengths (default 2,4,8)")
    p_bench.add_argument("--auto", action="store_true", help="also run auto mode, and report it against the best "
                         "fixed setting per prompt")
    from desktop_app.engine.cost_profiles import BUILTIN as PROFILES       # (no numpy, no llama.cpp)

    p_bench.add_argument("--replay", action="store_true", help="also record the prompts' greedy replies and replay "
                         "auto against every fixed setting under each cost profile "
                         f"({', '.join([*PROFILES, 'here'])})")
    p_bench.add_argument("--save-traces", metavar="OUT.json", help="with --replay: keep the recorded traces")
    p_bench.add_argument("--temp", default="0", metavar="LIST", help="temperatures (default 0: greedy)")
    p_bench.add_argument("-n", "--n-tokens", "--n-predict", dest="n_tokens", type=int, default=128, metavar="N",
                         help="tokens per run (default 128)")
    p_bench.add_argument("--repeat", type=int, default=3, metavar="N", help="repeats of every run (default 3)")
    p_bench.add_argument("--seed", type=int, default=0, help="random seed of sampled runs (default 0)")
    p_bench.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default, or 0: one per "
                         "performance core, held for the whole run so that its runs compare like with like)")
    p_bench.add_argument("-c", "--ctx-size", type=int, default=4096, help="context size in tokens (default 4096)")
    _add_gpu_options(p_bench)
    _add_server_options(p_bench, "also time a running llama-server on the prompts, between the local plain runs: "
                                 "its speed (by its own count) beside this machine's")
    _add_repack_option(p_bench)
    p_bench.add_argument("--json", metavar="OUT", help="write every run and the summary as JSON")
    p_bench.add_argument("--markdown", metavar="OUT", help="write the summary table as Markdown")
    p_bench.add_argument("--plot", metavar="OUT.png", help="draw speed-up against draft length (auto's: a level across it)")
    p_bench.add_argument("-q", "--quiet", action="store_true", help="no per-run progress lines")
    p_bench.set_defaults(func=lambda a: _run("bench", a))

    p_doctor = sub.add_parser("doctor", help="versions, CPU, llama.cpp build, weight repacking and folders: "
                                             "for a bug report")
    p_doctor.add_argument("--json", action="store_true", help="print one JSON document")
    p_doctor.add_argument("--reprobe", action="store_true", help="forget the remembered CPU probe verdict and probe again")
    p_doctor.add_argument("--no-probe", action="store_true", help="never run the CPU probe; report what is remembered")
    _add_repack_option(p_doctor)
    p_doctor.set_defaults(func=lambda a: _run("doctor", a))

    p_models = sub.add_parser("models", help="fetch and list model files (alone: list)",
                              description="Fetch and list model files; `tandem models` alone is `tandem models list`.")
    msub = p_models.add_subparsers(dest="models_command", metavar="{fetch,list}", parser_class=parser_class)
    p_fetch = msub.add_parser("fetch", help="fetch model files or sets (demo, test, incompatible, or a model key)")
    p_fetch.add_argument("names", nargs="+", metavar="NAME",
                         help=f"a set ({', '.join(SETS)}) or a model key ({', '.join(MODELS)})")
    p_fetch.add_argument("--json", action="store_true", help="print one JSON document")
    p_fetch.set_defaults(func=lambda a: _run("models", a))
    p_list = msub.add_parser("list", help="what is cached, where, its size, and whether it is verified; other "
                                          "GGUF files there, and those the window finds elsewhere")
    p_list.add_argument("--json", action="store_true", help="print one JSON document")
    p_list.add_argument("--verify", action="store_true", help="re-hash every file instead of trusting the record")
    p_list.set_defaults(func=lambda a: _run("models", a))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--engine-host"]:            # the window's engine process (engine/process), not for users
        from desktop_app.engine.process.host import main as engine_host

        return engine_host(argv[1:])
    if argv[:1] == ["--repack-probe"]:           # the CPU probe's child (engine/repack.py), not for users
        from desktop_app.engine.repack_probe import main as repack_probe

        return repack_probe(argv[1:])
    if argv[:1] == ["--without-amx"]:            # llama.cpp's tools, or the probe, with AMX kept out (engine/amx.py)
        from desktop_app.engine.amx import main as without_amx

        return without_amx(argv[1:])
    parser = build_parser(json_errors="--json" in argv)
    try:
        args, extra = parser.parse_known_args(argv)   # (--version and --help write here)
        if extra:                               # (said by the command's own parser: "see tandem generate -h")
            _chosen(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
        if args.command is None:
            return _run("gui", args)
        before = argv[:argv.index(args.command)]
        if args.command != "gui" and before:     # (the command's own defaults overwrote them: `tandem -c 512
            parser.error(f"options go after the command: tandem {args.command} {' '.join(before)} …")   # generate`
                                                                                      # ran at 4096, a review found)
        if args.command == "models" and args.models_command is None:      # `tandem models` alone: list them
            args = parser.parse_args([*argv, "list"])
        return args.func(args)
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:                   # Ctrl-C where a command does not handle it itself
        from desktop_app.commands.output import EXIT_INTERRUPTED, fail

        return fail(argparse.Namespace(json="--json" in argv), "interrupted", EXIT_INTERRUPTED)


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command `args` chose, so that its errors point to its own help (an unknown
    flag after `generate` said "see tandem -h": a new user's try)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(args, action.dest, None) in action.choices:
            return _chosen(action.choices[getattr(args, action.dest)], args)
    return parser


def _reader_gone() -> int:
    """The output's reader went away (`tandem models list | head`): stop, without a traceback, and
    with nothing left to flush at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 1


if __name__ == "__main__":
    sys.exit(main())
