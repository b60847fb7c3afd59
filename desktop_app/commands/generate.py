"""`tandem generate`: one prompt, K samples, every round reported (as text, or as one JSON document)."""
from __future__ import annotations

import argparse
import io
import os
import sys
from collections import Counter
from dataclasses import replace

from desktop_app.commands import checks
from desktop_app.commands.interrupt import Interrupt
from desktop_app.commands.output import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, emit_json, fail

ANSI = {"accepted": "\x1b[32m", "correction": "\x1b[33m", "bonus": "\x1b[34m", "plain": ""}   # (the window's
# colours, as near as a terminal's eight come: its red is a rejected draft, which the text never shows)
RESET = "\x1b[0m"


def _settings(args):
    """Every option checked before a model loads (see checks.py); raises ValueError."""
    from desktop_app.engine import SpecSettings

    drafter = args.drafter or ("model" if args.draft else "lookup")
    if drafter == "model" and not args.draft:
        raise ValueError("--drafter model needs a draft model (-md DRAFT)")
    # A target alone with neither a drafter nor a γ named runs auto, as the window does: it copies only
    # where that pays (a fixed γ of copies runs at 0.78-0.94× plain on text without repeats on CPUs;
    # docs/auto-mode.md)
    auto = args.auto or (not args.draft and args.drafter is None and args.draft_max is None)
    draft_max = 4 if args.draft_max is None else args.draft_max
    spec = SpecSettings(enabled=drafter != "none", drafter=drafter, draft_max=draft_max,
                        draft_min=args.draft_min, draft_p_min=args.draft_p_min, auto=auto)
    if drafter == "none" and args.draft_max is not None:       # (said nothing: a new user's try)
        checks.note("--draft-max does nothing with --drafter none: every token is a plain step")
    elif auto and drafter != "none" and args.draft_max is not None:   # (nor here: another's try)
        checks.note("--draft-max does nothing with --auto: auto chooses γ from 0 to 32 each round")
    if args.samples < 1:
        raise ValueError("--samples must be at least 1")
    if args.max_tokens < 1 and args.max_tokens != checks.NO_LIMIT:   # (llama.cpp's -1 was refused: a new user's try)
        raise ValueError("-n must be at least 1, or -1: until the context is full (as in llama.cpp)")
    sampling = sampling_params(args)
    if args.samples > 1 and sampling.temperature <= 0:     # (three alike, unsaid: a new user's try)
        checks.note(f"--samples {args.samples} at --temp 0 (greedy): every sample is the same text")
    return spec, sampling


def sampling_params(args):
    """The sampling options, checked (checks.py); raises ValueError."""
    from desktop_app.engine import SamplingParams

    return SamplingParams(temperature=checks.temperature(args.temp), top_k=checks.top_k(args.top_k),
                          top_p=checks.fraction("--top-p", args.top_p),
                          min_p=checks.fraction("--min-p", args.min_p), seed=checks.seed(args.seed))


def _prompt_text(args) -> str:
    """The prompt, read and checked before any model loads; raises ValueError."""
    checks.text("--system", args.system)
    for stop in args.stop:
        checks.text("--stop", stop)
    if args.prompt_file is None:
        text = checks.text("the prompt (-p)", args.prompt)
    else:
        try:
            if args.prompt_file == "-":            # (as llama.cpp's -f does not: standard input)
                if sys.stdin.isatty():
                    print("reading the prompt from standard input: end it with Ctrl-D", file=sys.stderr)
                with io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8") as stdin:   # (line ends as a
                    text = stdin.read()                                               # file's read)
            else:
                with open(args.prompt_file, encoding="utf-8") as fh:
                    text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the prompt file {args.prompt_file}: "
                             f"{exc.strerror if isinstance(exc, OSError) else 'it is not UTF-8 text'}") from None
    if (args.raw and not text and not args.system) or (not args.raw and not text.strip()):
        raise ValueError("the prompt is empty")      # (as the window sends no empty message)
    return text


def _prompt_tokens(pair, args, text: str) -> tuple[list[int], tuple[str, ...]]:
    """The prompt's tokens, and the stop strings its reply ends at (--stop, and the fallback template's
    next turn)."""
    from desktop_app.chat.template import ChatTemplate, Message

    if args.raw:
        prefix = (args.system + "\n\n") if args.system else ""
        return pair.target.tokenize(prefix + text, add_special=True, parse_special=False), tuple(args.stop)
    template = ChatTemplate(pair.target)
    if template.note and not args.json:
        print(f"note: {template.note}", file=sys.stderr)
    messages = ([Message("system", args.system)] if args.system else []) + [Message("user", text)]
    return template.tokenize(messages), template.stops(args.stop)


def run(args: argparse.Namespace) -> int:
    from desktop_app import models
    from desktop_app.commands.models import TerminalProgress
    from desktop_app.engine import IncompatiblePair, LoadOptions, ModelLoadError, ModelPair

    if args.server:
        from desktop_app.commands.remote import run_server

        return run_server(args)
    if not args.target:
        return fail(args, "a target model is needed: -m TARGET (or --server URL for a running llama-server)", EXIT_USAGE)
    try:
        spec, sampling = _settings(args)
        text = _prompt_text(args)
        n_ctx = checks.ctx_size(args.ctx_size)
        threads = checks.threads(args.threads)
        ngl, ngld, rpc_servers = checks.offload(args)
    except ValueError as exc:
        return fail(args, str(exc), EXIT_USAGE)
    repack = False if args.no_repack else None
    target_opts = LoadOptions(n_gpu_layers=ngl, n_threads=threads, n_ctx=n_ctx, repack=repack, rpc_servers=rpc_servers)
    draft_opts = LoadOptions(n_gpu_layers=ngld, n_threads=threads, n_ctx=n_ctx, repack=repack, rpc_servers=rpc_servers)
    status = LoadStatus(None if args.json else sys.stderr)
    out = Streamed(color=colored(args), quiet=args.json)
    try:
        progress = None if args.json else TerminalProgress()
        args.target = models.path_for(args.target, progress, "target model")
        if args.draft:
            args.draft = models.path_for(args.draft, progress, "draft model")
            if not args.json:
                checks.draft_note(args.target, args.draft)
        def interrupted():                         # a second Ctrl-C, which ends the process at once
            status.clear()
            out.end_line()
            fail(args, "interrupted", EXIT_INTERRUPTED)

        with Interrupt(on_force=interrupted) as interrupt:
            try:
                pair = ModelPair.load(args.target, args.draft, target_opts, draft_opts, progress=status,
                                      cancel=interrupt)
            except (ModelLoadError, IncompatiblePair) as exc:
                interrupt.check()                  # a load cancelled by Ctrl-C is an interruption
                return fail(args, checks.load_error(exc, args.target, args.draft), EXIT_FAIL)
            finally:
                status.clear()
            with pair:
                interrupt.check()                  # (pressed while the load, which it could not stop, ended)
                if pair.repack.notice:
                    checks.note(pair.repack.notice)
                checks.ctx_note(args.ctx_size, pair.n_ctx, args.target)
                n_ctx = pair.n_ctx
                prompt, stops = _prompt_tokens(pair, args, text)
                if not prompt:
                    return fail(args, "the prompt is empty", EXIT_USAGE)
                if len(prompt) >= n_ctx:
                    return fail(args, f"the prompt has {len(prompt)} tokens and the context holds {n_ctx}, "
                                      f"which leaves no room for a reply: shorten the prompt or raise -c", EXIT_FAIL)
                samples = [_sample(pair, args, spec, sampling, prompt, stops, k, out, interrupt)
                           for k in range(args.samples)]
    except models.FetchError as exc:
        return fail(args, str(exc), EXIT_FAIL)
    except KeyboardInterrupt:
        out.end_line()
        return fail(args, "interrupted", EXIT_INTERRUPTED)
    if args.json:
        emit_json({"ok": True, "target": args.target, "draft": args.draft, "prompt_tokens": len(prompt),
                   "settings": {"drafter": spec.drafter if spec.enabled else "none", "draft_max": spec.draft_max,
                                "draft_min": spec.draft_min, "draft_p_min": spec.draft_p_min, "auto": spec.auto,
                                "temp": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p,
                                "min_p": sampling.min_p, "threads": target_opts.threads,
                                "threads_follow_load": not threads, "n_ctx": n_ctx,
                                # (what else it takes to run it again: a new user's try)
                                "n_predict": args.max_tokens, "stop": list(stops), "system": args.system,
                                "raw": args.raw},
                   # (the summary line's measured speed-up, derived from the stats: without it, a script's reader
                   # took the stats' predicted_speedup_measured, a prediction, for it: a new user's try)
                   "samples": [{"seed": seed, "text": f.text, "tokens": list(f.tokens),
                                "measured_speedup": f.stats.measured_speedup,
                                "plain_tokens_per_s": f.stats.plain_tokens_per_s,
                                "rounds": [r.to_json() for r in rounds], "stats": f.stats.to_json()}
                               for seed, rounds, f in samples]})
    return EXIT_OK


def _sample(pair, args, spec, sampling, prompt: list[int], stops: tuple[str, ...], k: int, out: "Streamed",
            interrupt: Interrupt):
    """Sample k of args.samples (seed S + k): its text streamed to stdout (unless --json) and its
    numbers to stderr; returns (seed, rounds, finish)."""
    from desktop_app.engine import Controls, FinishEvent, RoundEvent, TokenEvent
    from desktop_app.engine.sampling import SamplingParams

    params = SamplingParams(sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p, sampling.seed + k)
    if args.samples > 1 and not args.json:    # (on stdout: where it goes to a file, the samples' texts
        out.write_line(f"[sample {k + 1}/{args.samples}{_seed_text(params)}]")   # ran together, a user's try)
    rounds, finish = [], None
    limit = pair.n_ctx if args.max_tokens == checks.NO_LIMIT else args.max_tokens   # (the context ends it first)
    for event in pair.generate(prompt, params, Controls(spec), limit, stops):
        interrupt.check()
        if isinstance(event, RoundEvent):
            rounds.append(event)
        elif isinstance(event, TokenEvent):
            out.write(event.text, event.kind.value)
        elif isinstance(event, FinishEvent):
            finish = event
            if rounds and event.end_after_rounds and not rounds[-1].end:     # (the mark the window's strip
                rounds[-1] = replace(rounds[-1], end=event.end_after_rounds)   # and its history give it)
    if not args.json:
        out.write(finish.tail)
        out.write("\n")                            # (each reply ends with a line break of its own)
        _print_stats(finish, k, args.samples, rounds, spec, params.seed if params.temperature > 0 else None,
                     args.max_tokens)
    return params.seed, rounds, finish


def colored(args) -> bool:
    """Colour the reply's tokens by kind: on a terminal, without --json, unless NO_COLOR is set
    (no-color.org)."""
    return sys.stdout.isatty() and not args.json and not os.environ.get("NO_COLOR")


def _seed_text(params) -> str:
    """", seed S" where sampling draws on the seed (not greedy)."""
    return f", seed {params.seed}" if params.temperature > 0 else ""


class Streamed:
    """The reply's text on stdout as it comes (coloured by kind on a terminal), and whether its last
    line is still open, so that what follows on the terminal starts on a line of its own."""

    def __init__(self, color: bool, quiet: bool):
        self.color = color
        self.quiet = quiet
        self.open = False

    def write(self, text: str, kind: str = "plain") -> None:
        if self.quiet or not text:
            return
        code = ANSI[kind] if self.color else ""
        sys.stdout.write(f"{code}{text}{RESET if code else ''}")
        sys.stdout.flush()
        self.open = not text.endswith("\n")

    def end_line(self) -> None:
        if self.open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.open = False

    def write_line(self, line: str) -> None:
        """A line of its own, never coloured (a sample's header)."""
        if not self.quiet:
            self.end_line()
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


class LoadStatus:
    """ModelPair.load's progress as one line on a terminal ("loading the target… 40 %", "measuring this
    machine's passes…"), cleared when the load ends; nothing where stderr is not a terminal."""

    STAGES = {"probe": "checking this CPU (once)", "target": "loading the target", "draft": "loading the draft",
              "measuring": "timing this machine's passes"}

    def __init__(self, stream):
        self.stream = stream if stream is not None and stream.isatty() else None
        self.line = ""

    def __call__(self, stage: str, fraction: float | None) -> None:
        if self.stream is None or stage not in self.STAGES:
            return
        pct = f" {10 * int(10 * fraction)} %" if stage in ("target", "draft") and fraction is not None else ""
        line = f"{self.STAGES[stage]}…{pct}"
        if line != self.line:                  # (llama.cpp reports a load's progress hundreds of times)
            self.stream.write(f"\r\x1b[K{line}")
            self.stream.flush()
            self.line = line

    def clear(self) -> None:
        if self.line:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.line = ""


def _print_stats(finish, k: int, n: int, rounds: list, spec, seed: int | None, limit: int) -> None:
    """The reply's numbers on stderr: how fast, what was kept, its rounds (for auto, counted by drafter;
    in fixed mode with the setting, as the window's footer names it: generate's defaults are not the
    window's, and it did not say, a new user's try), and the seed where sampling drew on one (with
    --samples, said before the reply). `spec`: the SpecSettings it ran with; `limit`: -n."""
    from desktop_app.counts import count
    from desktop_app.engine.explain import end_text, fewer_threads, passed_copies, repeats, stopped_by, unused_draft
    from desktop_app.engine.number_text import alpha_text, duration_text, rate_text, rates_finer, share_text
    from desktop_app.chat.reply_footer import DRAFTER_LABELS
    from desktop_app.engine.events import StopReason

    s = finish.stats
    head = f"[sample {k + 1}/{n}] " if n > 1 else ""
    tokens = count(s.n_tokens, "token") + end_text(s)    # ("+ end": kept + rounds = 17 beside "15 tokens")
    finer = rates_finer(s)          # (a digit more where "14.9" beside "1.00x (plain 15.0)" would not add up, as
                                    # the panel)
    measured = ""                   # (first: at the line's end, after 900 characters, it was lost, a new user's try)
    if s.measured_speedup is not None:
        earlier = "" if s.n_plain_rounds else ", timed before this reply"   # (the window's "earlier")
        measured = (f", measured {s.measured_speedup:.2f}x plain decoding (plain "
                    f"{rate_text(s.plain_tokens_per_s, finer)}{earlier})")
    parts = [f"{tokens}, {rate_text(s.tokens_per_s, finer)}{measured}, first token {duration_text(s.ttft_s)}",
             f"stopped by {stopped_by(s.stop_reason, f'the token limit (-n {limit})', 'Ctrl+C')}"
             + (" (its tokens counted, not printed)" if s.stop_reason == StopReason.STOP_STRING.value else "")]   # ("1 token" under
                                                                        # an empty reply: a new user's try)
    if n == 1 and seed is not None:
        parts.append(f"seed {seed}")
    if s.n_drafted:
        parts.append(f"kept {s.n_accepted}/{s.n_drafted} drafted ({share_text(s.acceptance_rate)}), "
                     f"α {alpha_text(s.alpha)}, {s.mean_accepted:.2f} kept per drafted round")
        split = f"draft {s.t_draft_s:.2f} s / target {s.t_verify_s:.2f} s"    # (the plain steps' too, as the panel)
        if s.c is not None and s.t_draft_step_s is not None:      # (copies take no model step: no c)
            split += f", c = {s.c:.2f}"
        parts.append(split)
        if not s.n_accepted:
            parts.append("no draft was kept: drafting only cost time (no speed-up predicted)")
        elif s.predicted_speedup_measured is not None:
            parts.append(f"predicted speed-up {s.predicted_speedup_measured:.2f}x (cost model, measured verify costs"
                         + (f"; {s.predicted_speedup:.2f}x if a check cost one pass)" if s.predicted_speedup else ")"))
    notes = []
    if spec.auto and spec.enabled:
        names = {"none": "plain", "lookup": "lookup", "model": "draft model"}
        counts = Counter(r.drafter for r in rounds)      # ("none" where a round drafted nothing)
        parts.append("auto's rounds: " + ", ".join(f"{counts[d]} {names.get(d, d)}" for d in ("model", "lookup", "none")
                                                   if d in counts))
        notes = [passed_copies(s), unused_draft(s)]       # (the window's sentences say why: so do these lines)
    elif not spec.enabled or spec.drafter == "none":
        parts.append(DRAFTER_LABELS["none"])
    else:
        parts.append(f"rounds ({DRAFTER_LABELS.get(spec.drafter, spec.drafter)}, γ {spec.draft_max}): "
                     f"{s.n_rounds - s.n_plain_rounds} drafted, {s.n_plain_rounds} plain")
    if finish.message:
        parts.append(finish.message)
    notes += [repeats(s), fewer_threads(s)]              # (the window's sentences say them too)
    # the numbers on a line, then each of the panel's sentences on one of its own (all on the one line, auto's
    # ran to 900 characters: a new user's try)
    print("\n".join([head + "; ".join(p for p in parts if p)] + [f"  {note}" for note in notes if note]), file=sys.stderr)
