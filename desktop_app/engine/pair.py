"""A loaded target model, an optional draft model, their contexts, and the decoder that drives them."""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from desktop_app.engine import backend, calibration_store
from desktop_app.engine.compat import IncompatiblePair, compare_vocabularies
from desktop_app.engine.decoding import SpeculativeDecoder
from desktop_app.engine.loading import LoadCancelled, LoadOptions, check_gguf_header, load_model, open_context
from desktop_app.engine.repack import RepackDecision, decide, in_this_process
from desktop_app.engine.threads import OthersLoad, ThreadCount

LoadProgress = Callable[[str, float], None]     # (what is loading, overall fraction 0..1)


class ModelPair:
    def __init__(self, target: backend.Model, target_ctx: backend.Context,
                 draft: backend.Model | None = None, draft_ctx: backend.Context | None = None,
                 repack: RepackDecision | None = None, threads: ThreadCount | None = None):
        self.target = target
        self.target_ctx = target_ctx
        self.draft = draft
        self.draft_ctx = draft_ctx
        self.repack = repack            # how the weights were loaded, and the notice to show once
        self.decoder = SpeculativeDecoder(target_ctx, draft_ctx, threads)

    @classmethod
    def load(cls, target_path: str, draft_path: str | None = None,
             target_options: LoadOptions = LoadOptions(), draft_options: LoadOptions | None = None,
             progress: LoadProgress | None = None, cancel: Callable[[], bool] | None = None) -> "ModelPair":
        """Load a target and an optional draft. The pair's compatibility is checked on vocabularies
        alone before any weights are read. Raises ModelLoadError, IncompatiblePair or LoadCancelled."""
        target_path = os.fspath(target_path)
        check_gguf_header(target_path)
        if draft_path is not None:
            draft_path = os.fspath(draft_path)
            check_gguf_header(draft_path)
            tv = load_model(target_path, vocab_only=True)
            dv = load_model(draft_path, vocab_only=True)
            try:
                verdict = compare_vocabularies(tv, dv)
            finally:
                tv.close()
                dv.close()
            if not verdict.ok:
                raise IncompatiblePair(f"{os.path.basename(draft_path)} cannot draft for "
                                       f"{os.path.basename(target_path)}: {verdict.reason}")
        draft_options = draft_options or target_options
        override = _repack_override(target_options, draft_options)
        repack = decide(override, probe=False)
        if repack is None:                       # the first model on this machine: the CPU probe runs
            if progress:
                progress("probe", 0.0)
            repack = decide(override)
        if cancel and cancel():
            raise LoadCancelled(target_path)
        repack = in_this_process(repack)
        target_options = replace(target_options, repack=repack.enabled)
        draft_options = replace(draft_options, repack=repack.enabled)
        sizes = [os.path.getsize(target_path), os.path.getsize(draft_path) if draft_path else 0]
        total = float(sum(sizes)) or 1.0

        def reporter(name: str, offset: float, weight: float):
            if progress is None:
                return None
            return lambda f: progress(name, (offset + f * weight) / total)

        target = load_model(target_path, target_options, progress=reporter("target", 0, sizes[0]), cancel=cancel)
        draft = target_ctx = draft_ctx = None
        try:
            if draft_path is not None:
                draft = load_model(draft_path, draft_options, progress=reporter("draft", sizes[0], sizes[1]),
                                   cancel=cancel)
            if cancel and cancel():
                raise LoadCancelled(draft_path or target_path)
            target_ctx = open_context(target, target_options)
            if draft is not None:
                draft_ctx = open_context(draft, draft_options)
        except BaseException:
            for obj in (draft_ctx, target_ctx, draft, target):
                if obj is not None:
                    obj.close()
            raise
        threads = ThreadCount([target_ctx, draft_ctx], target_options.threads,
                              None if target_options.n_gpu_layers else _others_load(),
                              follow=target_options.automatic and draft_options.automatic,
                              automatic=LoadOptions().threads)
        threads.look_quietly()                               # (calibration times the count replies start on)
        pair = cls(target, target_ctx, draft, draft_ctx, repack, threads)
        if progress:
            progress("measuring", 1.0)
        try:
            pair._calibrate(target_path, target_options)
        except BaseException:
            pair.close()
            raise
        if progress:
            progress("ready", 1.0)
        return pair

    def _calibrate(self, target_path: str, options: LoadOptions) -> None:
        """Time the passes auto mode and the predictions rest on, with what earlier loads of this target
        on this machine timed (calibration_store); a store that fails is no store, and so is a load on
        fewer threads than it may use (other programs busy: the stored timings are not of this count,
        and its own would mislead later loads)."""
        threads = self.decoder.threads
        try:
            store_key = calibration_store.key(target_path, options) \
                if calibration_store.rememberable(options) and threads.current == threads.most else None
            remembered = calibration_store.remembered(store_key) if store_key else None
        except Exception:                      # (a file gone since loading, a damaged machine probe)
            store_key = remembered = None
        timed = self.decoder.calibrate(remembered=remembered)
        if store_key and timed:
            try:
                calibration_store.remember(store_key, timed, os.path.basename(target_path),
                                           calibration_store.setup(options))
            except Exception:                  # (a file another process damaged meanwhile) not worth a load
                pass

    @property
    def plain_step_s(self) -> float:
        """Seconds of one single-token target pass, as timed at load (0.0: not timed): what plain
        decoding's rate is estimated from before a reply times any plain step of its own."""
        return self.decoder.costs.verify_s.get(1, 0.0)

    @property
    def n_ctx(self) -> int:
        return self.target_ctx.n_ctx

    def generate(self, *args, **kwargs):
        return self.decoder.generate(*args, **kwargs)

    def top_logits(self, tokens: Sequence[int], k: int = 2) -> list[tuple[int, float]]:
        """The target's k best next tokens after `tokens`, as (token, logit), highest first: how close a
        greedy choice was. The target's cache keeps whatever prefix it shares with `tokens` (the next
        generation reuses it as usual); the last token is evaluated alone, as plain decoding does."""
        if not tokens:
            raise ValueError("top_logits needs at least one token")
        ctx = self.target_ctx
        ctx.sync(list(tokens), logits="last")
        logits = ctx.logits(-1)
        k = max(1, min(k, logits.shape[0]))
        best = np.argpartition(logits, -k)[-k:]
        best = best[np.argsort(-logits[best], kind="stable")]
        return [(int(t), float(logits[t])) for t in best]

    def close(self) -> None:
        for obj in (self.draft_ctx, self.target_ctx, self.draft, self.target):
            if obj is not None:
                obj.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _others_load() -> OthersLoad | None:
    """The load automatic threads follow (threads.py), and a set count's replies are told of; None
    where psutil cannot read the machine's counters."""
    try:
        return OthersLoad()
    except Exception:
        return None


def _repack_override(*options: LoadOptions) -> bool | None:
    """One decision for both models: off if either asks for off, else on if either forces it."""
    wanted = {o.repack for o in options}
    return False if False in wanted else True if True in wanted else None
