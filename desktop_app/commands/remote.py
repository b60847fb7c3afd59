"""`tandem generate --server URL`: the same reply and report, through a running llama-server."""
from __future__ import annotations

import os
import sys

from desktop_app.commands import checks
from desktop_app.commands.output import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, emit_json, fail

LOCAL_ONLY = {"target": "-m", "draft": "-md", "rpc": "--rpc", "gpu_layers": "-ngl", "gpu_layers_draft": "-ngld"}


def _listed(names: list[str]) -> str:
    """'-m', '-m and -md', '-m, -md and --rpc'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def run_server(args) -> int:
    from desktop_app.commands.generate import ANSI, RESET, _prompt_text, colored, sampling_params
    from desktop_app.engine import FinishEvent, RoundEvent, TokenEvent
    from desktop_app.engine.sampling import SamplingParams
    from desktop_app.remote.server import LIMITS, LlamaServer, ServerError

    given = [flag for name, flag in LOCAL_ONLY.items() if getattr(args, name, None) not in (None, False)]
    if given:
        return fail(args, f"--server runs the server's own models and speculation; "
                          f"{_listed(given)} {'is' if len(given) == 1 else 'are'} for local models only",
                    EXIT_USAGE)
    if args.drafter or args.auto or args.draft_max is not None:
        checks.note("llama-server sets speculation when it starts (-md, --spec-type, --spec-draft-n-max); "
                    "--drafter, --draft-max and --auto are not sent")
    try:
        text = _prompt_text(args)
        sampling = sampling_params(args)
        if args.max_tokens < 1 and args.max_tokens != checks.NO_LIMIT or args.samples < 1:
            raise ValueError("-n must be at least 1 or -1 (no limit, as in llama.cpp), and --samples at least 1")
    except ValueError as exc:
        return fail(args, str(exc), EXIT_USAGE)
    if args.raw:
        return fail(args, "--raw is for local models: llama-server applies its own chat template", EXIT_USAGE)
    server = LlamaServer(args.server, args.api_key or os.environ.get("TANDEM_API_KEY"))
    try:
        info = server.connect()
    except ServerError as exc:
        return fail(args, str(exc), EXIT_FAIL)
    if not args.json:
        checks.note(info.describe())
        if info.speculative is False:
            checks.note("this server does not speculate, so every round is a plain step; to speculate, start it "
                        "as: " + info.command_hint())
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [{"role": "user", "content": text}]
    color = colored(args)
    samples = []
    try:
        for k in range(args.samples):
            params = SamplingParams(sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p, sampling.seed + k)
            rounds, finish = [], None
            try:
                for event in server.generate(messages, params, args.max_tokens, args.stop):
                    if isinstance(event, RoundEvent):
                        rounds.append(event)
                    elif isinstance(event, TokenEvent) and not args.json:
                        code = ANSI[event.kind.value] if color else ""
                        sys.stdout.write(f"{code}{event.text}{RESET if code else ''}")
                        sys.stdout.flush()
                    elif isinstance(event, FinishEvent):
                        finish = event
            except ServerError as exc:
                return fail(args, str(exc), EXIT_FAIL)
            samples.append((params.seed, rounds, finish, server.last_reply))
            if not args.json:
                sys.stdout.write("\n")
                _print_stats(finish, server.last_reply, k, args.samples, args.max_tokens, bool(args.stop))
    except KeyboardInterrupt:
        server.cancel()
        return fail(args, "interrupted", EXIT_INTERRUPTED)
    if args.json:
        emit_json({"ok": True, "server": info.url, "model": info.model,
                   "speculation": {"speculative": info.speculative, "types": info.spec_types, "n_max": info.n_max,
                                   "limits": LIMITS},
                   "samples": [{"seed": seed, "text": f.text, "rounds": [r.to_json() for r in rounds],
                                "stats": f.stats.to_json(), "message": f.message,
                                "server_timings": reply.final_timings, "metrics_delta": reply.metrics_delta,
                                "accepted_per_pos": reply.accepted_per_pos}
                               for seed, rounds, f, reply in samples]})
    return EXIT_OK if all(not f.message for _, _, f, _ in samples) else EXIT_FAIL


def _stopped_by(finish, limit: int, stops: bool) -> str:
    """What ended a server's reply, in words: its "stop" is the model's end or a stop string, and a reply
    it broke off (the message that follows says how) was not stopped by Ctrl+C, which leaves before this."""
    from desktop_app.engine.events import StopReason
    from desktop_app.engine.explain import stopped_by

    if finish.broke_off:
        return "stopped: the server broke off"
    if stops and finish.stop_reason == StopReason.EOS:
        return "stopped by its end or a stop string (the server tells neither apart)"
    length = f"the token limit (-n {limit})" if limit > 0 else "the server's context (no -n limit)"   # (-n -1)
    return "stopped by " + stopped_by(finish.stop_reason.value, length, "Ctrl+C")


def _print_stats(finish, reply, k: int, n: int, limit: int, stops: bool) -> None:
    from desktop_app.counts import count
    from desktop_app.engine.number_text import duration_text, share_text

    s = finish.stats
    head = f"[sample {k + 1}/{n}] " if n > 1 else ""
    parts = [f"{count(s.n_tokens, 'token')}, {s.tokens_per_s:.1f} tok/s (the server's count), first token "
             f"{duration_text(s.ttft_s)}", _stopped_by(finish, limit, stops)]
    if s.n_drafted:
        parts.append(f"kept {s.n_accepted}/{s.n_drafted} drafted ({share_text(s.acceptance_rate)}) in "
                     f"{s.n_rounds - s.n_plain_rounds} rounds, {s.mean_accepted:.2f} kept per drafted round")
    if reply.accepted_per_pos:
        parts.append("kept at draft position " + " ".join(f"{i + 1}:{v}" for i, v in enumerate(reply.accepted_per_pos)))
    if finish.message:
        parts.append(finish.message)
    print(head + "; ".join(parts), file=sys.stderr)
