"""Running benchmark settings interleaved (plain, A, plain, B, plain, ...) so machine drift cancels."""
from __future__ import annotations

import resource
from dataclasses import asdict, dataclass
from typing import Callable

from desktop_app.chat.template import ChatTemplate, Message
from desktop_app.engine import Controls, FinishEvent, ModelPair, SamplingParams, SpecSettings
from desktop_app.engine.auto_policy import AUTO_GAMMA_MAX
from desktop_app.engine.number_text import alpha_text
from desktop_app.engine.lookup_ceiling import lookup_ceiling
from desktop_app.engine.threads import cpus, crowded
from desktop_app.bench.prompts import BenchPrompt
from desktop_app.remote.server import ServerError

AROUND_S = 2.0   # a run is marked "other work" where it was crowded during the run, or over the last this many
                 # seconds: beside a loop spinning on one CPU of two, a run of 0.1-0.2 s read under the mark now
                 # and then (the loop got less than its share of so short a time: 1 CI run in 6, and 1 of 2
                 # with the run alone looked at), and a 2 s look reads it whole


@dataclass(frozen=True)
class BenchSetting:
    drafter: str            # "none" (plain), "model", "lookup", or "server" (a llama-server, as it was started)
    draft_max: int = 0
    auto: bool = False
    temperature: float = 0.0

    @property
    def name(self) -> str:
        if self.drafter == "none":
            base = "plain"
        elif self.drafter == "server":
            base = "llama-server"
        elif self.auto:     # (with a draft model auto copies too: "model auto" read as the model alone)
            base = "auto (model, lookup)" if self.drafter == "model" else "auto (lookup)"
        else:
            base = f"{self.drafter} γ={self.draft_max}"
        return base if self.temperature == 0 else f"{base} T={self.temperature:g}"

    @property
    def is_plain(self) -> bool:
        return self.drafter == "none"

    def spec(self) -> SpecSettings:
        if self.is_plain or self.drafter == "server":
            return SpecSettings(enabled=False, drafter="none")
        return SpecSettings(enabled=True, drafter=self.drafter, draft_max=self.draft_max, auto=self.auto)


@dataclass
class RunResult:
    prompt: str
    setting: str
    repeat: int              # 1, 2, …: as the progress lines count them (it was 0-based here, 1-based there)
    n_tokens: int
    tokens_per_s: float
    ttft_s: float
    alpha: float | None
    acceptance_rate: float | None
    mean_accepted: float | None
    mean_drafted: float | None
    t_draft_s: float
    t_verify_s: float
    c: float | None
    predicted_speedup: float | None
    predicted_speedup_measured: float | None
    stop_reason: str
    index: int = -1          # place in the run order; a run is compared with the plain runs either side
    lookup_ceiling: float | None = None   # plain runs: the best speed-up any prompt lookup could reach on
                                          # this reply at the verify costs measured so far (lookup_ceiling.py)
    others_cpus: float | None = None      # the CPUs other work used at the looks during the run (threads.py;
                                          # None: not looked at, as with layers on a GPU)
    busy: bool = False                    # other work took CPUs the run's threads needed (threads.crowded):
                                          # its ratios are not like for like

    def to_json(self) -> dict:
        return asdict(self)


def make_settings(drafters: list[str], draft_maxes: list[int], temps: list[float], auto: bool,
                  has_draft_model: bool, server: bool = False) -> list[BenchSetting]:
    """Plain first for each temperature, then every drafter × draft length (and auto, if asked; and
    the llama-server, if given)."""
    out: list[BenchSetting] = []
    for temp in temps:
        out.append(BenchSetting("none", temperature=temp))
        if server:
            out.append(BenchSetting("server", temperature=temp))
        for drafter in drafters:
            if drafter == "model" and not has_draft_model:
                continue
            for g in draft_maxes:
                out.append(BenchSetting(drafter, g, False, temp))
            if auto:
                out.append(BenchSetting(drafter, max(draft_maxes), True, temp))
    return out


def interleaved_order(prompts: list[str], settings: list[str], repeats: int,
                      baseline: dict[str, str] | None = None) -> list[tuple[int, str, str]]:
    """(repeat, prompt, setting) in run order. Within each repeat and prompt, every setting runs
    between two runs of its plain baseline (plain, A, plain, B, plain, ...), so each run is compared
    with plain runs made just before and just after it and slow drift of the machine cancels. Odd
    repeats take the settings in reverse order, so no setting always runs first or last.
    `baseline` maps a setting to its plain setting (default: every setting to "plain")."""
    baseline = baseline or {}
    plains = list(dict.fromkeys(baseline.get(s, "plain") for s in settings))
    order: list[tuple[int, str, str]] = []
    for r in range(repeats):
        for p in prompts:
            for plain in plains:
                group = [s for s in settings if s != plain and baseline.get(s, "plain") == plain]
                if r % 2:
                    group.reverse()
                order.append((r, p, plain))
                for s in group:
                    order += [(r, p, s), (r, p, plain)]
    return order


def williams_row(n: int, r: int) -> list[int]:
    """The order of n runs in repeat r: row r of a Williams Latin square (n even; for odd n, the n
    rows of the square, then the n rows of its mirror). Over n repeats (2n for odd n) every run takes
    every place equally often and follows every other run equally often, so neither a place in the order nor the run before
    (a llama.cpp process that just left the caches cold, say) favours one run over another."""
    base = [0]
    for k in range(1, n):
        base.append((k + 1) // 2 if k % 2 else n - k // 2)
    row = [(b + r) % n for b in base]
    return row[::-1] if n % 2 and (r // n) % 2 else row


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def ceiling_draft_max(settings: list[BenchSetting]) -> int:
    """The longest copy the lookup ceiling allows: the longest draft benched (16 if none is), and auto's own
    longest where it is benched (it drafts up to AUTO_GAMMA_MAX, whatever --draft-max says: at the
    --draft-max of 4 the "ceiling" was 1.24× beside auto's 1.27×, a new user's try)."""
    longest = max((AUTO_GAMMA_MAX if s.auto else s.draft_max for s in settings if s.drafter != "server"), default=0)
    return longest or 16


def prompt_tokens(pair: ModelPair, prompts: list[BenchPrompt]) -> dict[str, list[int]]:
    """Each prompt as the window would send it: a user message in the target's chat template."""
    template = ChatTemplate(pair.target)
    return {p.name: template.tokenize([Message("user", p.text)]) for p in prompts}


def run_bench(pair: ModelPair, prompts: list[BenchPrompt], settings: list[BenchSetting], n_tokens: int,
              repeats: int, seed: int = 0, log: Callable[[str], None] = lambda _m: None,
              server=None, results: list[RunResult] | None = None,
              check: Callable[[], None] = lambda: None) -> list[RunResult]:
    """Every setting on every prompt, interleaved with plain runs; "server" settings run on `server`
    (a remote.server.LlamaServer: its own models and speculation, its own measured decoding rate).
    Each finished run is added to `results` as it ends (given, a caller that is interrupted keeps them);
    `check()` is called at every event of a run (it raises to stop: the run under way is left out)."""
    tokens = prompt_tokens(pair, prompts)
    by_name = {s.name: s for s in settings}
    results = [] if results is None else results
    baseline = {s.name: BenchSetting("none", temperature=s.temperature).name for s in settings}
    order = interleaved_order([p.name for p in prompts], [s.name for s in settings], repeats, baseline)
    longest = ceiling_draft_max(settings)
    widths = (max(8, *(len(p.name) for p in prompts)), max(18, *(len(s.name) for s in settings)))   # (columns that
    for i, (r, prompt, name) in enumerate(order):                                                  # stay put)
        at = f"[{i + 1:>{len(str(len(order)))}}/{len(order)}]"     # (padded: the columns stay put past 9)
        setting = by_name[name]
        pair.target_ctx.clear()                       # every run evaluates its prompt afresh
        if pair.draft_ctx is not None:
            pair.draft_ctx.clear()
        sampling = SamplingParams(temperature=setting.temperature, seed=seed + r)
        finish = None
        start = pair.decoder.threads.mark() if setting.drafter != "server" else None   # (look_since, below)
        if setting.drafter == "server":
            text = next(p.text for p in prompts if p.name == prompt)
            try:
                events = server.generate([{"role": "user", "content": text}], sampling, n_tokens)
            except ServerError as exc:                   # one refused run: said, left out, the bench goes on
                log(f"{at} {name}: {exc}")
                continue
        else:
            events = pair.generate(tokens[prompt], sampling, Controls(setting.spec()), n_tokens)
        for event in events:
            check()
            if isinstance(event, FinishEvent):
                finish = event
        s = finish.stats
        ceiling = (lookup_ceiling(tokens[prompt], finish.tokens, pair.decoder.costs.verify_cost, longest)
                   if setting.is_plain else None)
        if setting.drafter == "server" and finish.message:     # a server that failed mid-run: said, left out
            log(f"{at} {name}: {finish.message}")
            continue
        others, threads = s.others_cpus, pair.decoder.threads
        if setting.drafter != "server":               # (the count stays: bench holds it)
            threads.look_since(start)                 # over the whole run (one shorter than the decoder's
            during = threads.others                   # interval between looks had none of its own) ...
            threads.look_back(AROUND_S)               # ... and over the seconds around it
            seen = [x for x in (others, during, threads.others) if x is not None]
            others = max(seen) if seen else None
        busy = others is not None and setting.drafter != "server" and crowded(threads.current, others, cpus())
        results.append(RunResult(prompt, name, r + 1, s.n_tokens, s.tokens_per_s, s.ttft_s, s.alpha, s.acceptance_rate,
                                 s.mean_accepted, s.mean_drafted, s.t_draft_s, s.t_verify_s, s.c,
                                 s.predicted_speedup, s.predicted_speedup_measured, s.stop_reason, i, ceiling,
                                 others, busy))
        log(f"{at} repeat {r + 1} {prompt:<{widths[0]}} {name:<{widths[1]}} {s.tokens_per_s:6.1f} tok/s"
            + (f"  α {alpha_text(s.alpha)}" if s.alpha is not None else "")
            + (f"  (other work: {others:.1f} CPUs)" if busy else ""))
    return results
