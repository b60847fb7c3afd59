"""`tandem bench`: plain and speculative settings, interleaved, with medians and speed-up ratios."""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from desktop_app.commands import checks
from desktop_app.commands.interrupt import Interrupt
from desktop_app.commands.output import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, fail
from desktop_app.counts import count
from desktop_app.engine.threads import physical_cores

OUTPUTS = (("--json", "json"), ("--markdown", "markdown"), ("--plot", "plot"))


def _list(text: str, cast, flag: str) -> list:
    """A flag's comma-separated values, each cast; a value that cannot be is named with its flag ("invalid
    literal for int() with base 10: 'abc'" named neither: a new user's try)."""
    out = []
    for x in (x.strip() for x in text.split(",")):
        if x:
            try:
                out.append(cast(x))
            except ValueError:
                kind = "a whole number" if cast is int else "a number"
                raise ValueError(f"{flag} takes {kind} or a comma-separated list of them, not {x!r}") from None
    return out


def check_writable(option: str, path: str) -> None:
    """Refuse, before the run (which can take an hour), an output file that cannot be written."""
    existed = os.path.lexists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot be written ({exc.strerror or exc})") from None
    if not existed:
        os.remove(path)


def write_outputs(args: argparse.Namespace, write: dict) -> list[str]:
    """Write each output asked for (option -> function of the path); what failed, one line each."""
    failed = []
    for option, attr in OUTPUTS:
        path = getattr(args, attr)
        if path:
            try:
                write[option](path)
            except OSError as exc:
                failed.append(f"{option} {path}: cannot be written ({exc.strerror or exc})")
    return failed


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def memory_budget(paths: list[str], n_ctx: int, rss_loaded: int, peak: int) -> dict | None:
    """Resident memory against model files plus KV caches, from the files' headers; None when a header
    cannot be read (the run's results are kept all the same)."""
    from desktop_app.models.gguf_info import GGUFError, read_info

    try:
        infos = [read_info(p) for p in paths]
    except GGUFError as exc:
        print(f"note: no memory budget: {exc}", file=sys.stderr)
        return None
    files = sum(i.file_size for i in infos)
    kv = sum(i.kv_cache_bytes(n_ctx) for i in infos)
    peak = max(peak, rss_loaded)    # the kernel counts resident pages lazily (per-CPU batches): the high-water
                                    # mark read at the end can trail the resident size read after loading by a few pages
    return {"rss_loaded_mb": rss_loaded / 1e6, "rss_peak_mb": peak / 1e6, "model_files_mb": files / 1e6,
            "kv_caches_mb": kv / 1e6, "budget_base_mb": (files + kv) / 1e6, "overhead_mb": (peak - files - kv) / 1e6}


def replay_verdicts(pair, prompts, n_tokens: int, save: str | None, log, check=lambda: None) -> dict:
    """Record the prompts' greedy replies on `pair` (trace.py) and judge auto against every fixed
    setting on them under each built-in cost profile and this machine's. `check()` is called between
    steps (it raises to stop)."""
    from desktop_app.bench.runner import prompt_tokens
    from desktop_app.engine.cost_profiles import BUILTIN as PROFILES
    from desktop_app.engine.replay import judge
    from desktop_app.engine.trace import record

    log("recording traces for the replay (greedy replies, the draft's guesses, this machine's pass costs)")
    traces = record(pair, list(prompt_tokens(pair, prompts).items()), n_tokens,
                    log=lambda message: (check(), log(message)))
    check()
    if save:
        try:
            traces.save(save)
            log(f"traces saved to {save}")
        except OSError as exc:
            print(f"tandem: error: --save-traces {save}: cannot be written ({exc.strerror or exc})", file=sys.stderr)
    noise, seeds = 0.05, 3
    verdicts = []
    for profile in [*PROFILES.values(), traces.here]:
        for trace in traces.traces:
            check()
            v = judge(trace, profile, traces.draft is not None, noise, seeds)
            verdicts.append({"profile": v.profile, "prompt": v.prompt, "best_fixed": v.best_fixed,
                             "vs_best": v.vs_best, "vs_plain": v.vs_plain, "ttft_vs_plain": v.ttft_vs_plain})
    return {"noise": noise, "seeds": seeds, "machine": traces.machine, "here": traces.here.to_json(),
            "verdicts": verdicts}


def run(args: argparse.Namespace) -> int:
    from desktop_app import models
    from desktop_app.bench.plot import plot_speedups
    from desktop_app.bench.prompts import load_prompts
    from desktop_app.bench.report import busy_runs, summarize, to_json, to_markdown
    from desktop_app.bench.runner import (ceiling_draft_max, current_rss_bytes, make_settings, peak_rss_bytes,
                                          prompt_tokens, run_bench)
    from desktop_app.engine import IncompatiblePair, LoadOptions, ModelLoadError, ModelPair

    try:
        drafters = _list(args.drafter or ("model,lookup" if args.draft else "lookup"), str, "--drafter")
        draft_maxes = _list(args.draft_max, int, "--draft-max")
        temps = [checks.temperature(t) for t in _list(args.temp, float, "--temp")]
        prompts = load_prompts(args.prompts)
        if any(d not in ("model", "lookup") for d in drafters):
            raise ValueError("--drafter takes model and/or lookup")
        if "model" in drafters and not args.draft:       # (it ran plain decoding alone, and said nothing)
            raise ValueError("--drafter model needs a draft model (-md DRAFT)")
        wrong = [g for g in draft_maxes if not 1 <= g <= 32]
        if wrong:
            raise ValueError(f"--draft-max values must be between 1 and 32, not {wrong[0]}")
        if not prompts:
            raise ValueError("no prompts")
        if args.n_tokens < 1 or args.repeat < 1:
            raise ValueError("-n and --repeat must be at least 1")
        seed = checks.seed(args.seed)
        n_ctx = checks.ctx_size(args.ctx_size)
        for option, attr in OUTPUTS:
            if getattr(args, attr):
                check_writable(option, getattr(args, attr))
        if args.save_traces:
            if not args.replay:
                raise ValueError("--save-traces needs --replay")
            check_writable("--save-traces", args.save_traces)
        threads = checks.threads(args.threads) or physical_cores()   # (held: runs compare like with like)
        ngl, ngld, rpc_servers = checks.offload(args)
    except (ValueError, OSError) as exc:
        return fail(args, str(exc), EXIT_USAGE)
    server = None
    if args.server:                                  # checked first: a wrong address fails before any load
        from desktop_app.remote.server import LlamaServer, ServerError

        server = LlamaServer(args.server, args.api_key or os.environ.get("TANDEM_API_KEY"))
        try:
            checks.note(server.connect().describe())
        except ServerError as exc:
            return fail(args, str(exc), EXIT_FAIL)
    repack = False if args.no_repack else None
    target_opts = LoadOptions(n_gpu_layers=ngl, n_threads=threads, n_ctx=n_ctx, repack=repack, rpc_servers=rpc_servers)
    draft_opts = LoadOptions(n_gpu_layers=ngld, n_threads=threads, n_ctx=n_ctx, repack=repack, rpc_servers=rpc_servers)
    try:
        target = models.path_for(args.target, role="target model")
        draft = models.path_for(args.draft, role="draft model") if args.draft else None
        checks.draft_note(target, draft)
        with Interrupt(on_force=lambda: fail(args, "interrupted", EXIT_INTERRUPTED)) as interrupt:
            try:                                     # (while llama.cpp loads, Ctrl-C is noted, then acted on)
                pair = ModelPair.load(target, draft, target_opts, draft_opts, cancel=interrupt)
            except (ModelLoadError, IncompatiblePair):
                interrupt.check()
                raise
            if interrupt():                          # (pressed while the load, which it could not stop, ended)
                pair.close()
                raise KeyboardInterrupt
    except (ModelLoadError, IncompatiblePair) as exc:
        return fail(args, checks.load_error(exc, target, draft), EXIT_FAIL)
    except models.FetchError as exc:
        return fail(args, str(exc), EXIT_FAIL)
    except KeyboardInterrupt:
        return fail(args, "interrupted", EXIT_INTERRUPTED)
    if pair.repack.notice:
        checks.note(pair.repack.notice)
    checks.ctx_note(args.ctx_size, pair.n_ctx, args.target)
    for name, tokens in prompt_tokens(pair, prompts).items():      # (a run that cannot start measured 0 tok/s)
        if len(tokens) >= pair.n_ctx:
            message = (f"the prompt {name} has {len(tokens)} tokens and the context holds {pair.n_ctx}, which "
                       f"leaves no room for a reply: shorten it or raise -c")
            pair.close()
            return fail(args, message, EXIT_FAIL)
        if len(tokens) + args.n_tokens > pair.n_ctx:
            checks.note(f"the prompt {name} has {len(tokens)} tokens: the context ({pair.n_ctx}) has room for "
                        f"{pair.n_ctx - len(tokens)} of the {args.n_tokens} tokens asked for, so its runs may end "
                        f"sooner (raise -c)")
    settings = make_settings(drafters, draft_maxes, temps, args.auto, draft is not None, server is not None)
    rss_loaded = current_rss_bytes()
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if not args.quiet else (lambda m: None)
    replay = None
    results: list = []
    n_ctx = pair.n_ctx
    interrupted = None                               # or where Ctrl-C stopped the bench: "runs" or "replay"
    phase = "runs"
    # While llama.cpp runs, Ctrl-C is only noted, and acted on between tokens (interrupt.py): raised
    # inside a prompt pass's abort callback it was dropped, and the bench went on to its end.
    with Interrupt(on_force=lambda: fail(args, "interrupted", EXIT_INTERRUPTED)) as interrupt:
        try:
            with pair:
                run_bench(pair, prompts, settings, args.n_tokens, args.repeat, seed, log, server, results,
                          interrupt.check)
                if args.replay:
                    phase = "replay"
                    replay = replay_verdicts(pair, prompts, args.n_tokens, args.save_traces, log, interrupt.check)
        except KeyboardInterrupt:                    # the runs that finished are reported, marked so
            if not results:
                return fail(args, "interrupted", EXIT_INTERRUPTED)
            interrupted = phase
    meta = {"command": "tandem " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
            "target": target, "draft": draft, "target_name": os.path.basename(target),
            "draft_name": os.path.basename(draft) if draft else None, "threads": threads, "n_ctx": n_ctx,
            "n_tokens": args.n_tokens, "repeats": args.repeat, "seed": seed, "prompts": [p.name for p in prompts],
            "lookup_ceiling_draft_max": ceiling_draft_max(settings),
            "repack": {"enabled": pair.repack.enabled, "reason": pair.repack.reason},
            "memory": memory_budget([p for p in (target, draft) if p], n_ctx, rss_loaded, peak_rss_bytes()),
            "replay": replay, "server": server.info.describe() if server else None,
            "interrupted": interrupted, "busy_runs": busy_runs(results)}
    rows = summarize(results, settings)
    markdown = to_markdown(rows, meta)
    print(markdown, flush=True)             # first: an output that fails to write below loses nothing
    title = meta["target_name"] + (f" + {meta['draft_name']}" if draft else "")
    failed = write_outputs(args, {"--json": lambda path: _write_text(path, to_json(rows, results, meta)),
                                  "--markdown": lambda path: _write_text(path, markdown),
                                  "--plot": lambda path: plot_speedups(rows, path, title)})
    for message in failed:
        print(f"tandem: error: {message} (the table above has the results)", file=sys.stderr)
    if interrupted == "runs":
        print(f"tandem: interrupted: the table above has the {count(len(results), 'run')} that finished",
              file=sys.stderr)
    elif interrupted == "replay":
        print("tandem: interrupted: the table above has every run; the replay did not finish", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAIL if failed else EXIT_OK
