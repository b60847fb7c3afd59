"""Cost profiles: what a machine charges for each kind of pass, for judging auto mode in replay.

A profile gives the milliseconds of a target pass over b tokens with logits at every position (a
verify pass; b = 1 is a plain step), of one draft-model step, and of one token of a batched prompt
pass through each model (beyond the pass's single step: CostModel.prefill_cost; each was timed over
a prompt long enough that the step is a small part of it). Sizes between those listed are
interpolated (CostModel.verify_cost).

Built in:
- "steep": this project's 2-core AMD EPYC, demo pair (docs/performance.md, "What it means"): a 17-token check
  costs 8.6-9.9 single passes.
- "xeon": a 2-core Intel Xeon with repacking off, from llama-bench pp1/2/3/5/9/17/33 = 80/108/133/
  178/223/299/391 ms (issue #14); its prompt costs from the time to first token the same issue
  measured there (edit prompt, 330 tokens: 1550 ms plain, about 2700 ms with the draft reading it).
  Its draft step was not measured there: 0.45 of a target pass is assumed (the 0.5B/1.5B ratio of
  weight bytes, 0.38, plus the draft's large output layer).
- "gpu": a verify pass of up to 17 tokens costs 1.1-1.5 single passes, as a pass over a few tokens
  does on a GPU while reading the weights dominates. Sources: llama.cpp PR #16894's
  llama-batched-bench table (7B Q8_0, GPU: 79 t/s at 1 sequence, 136 at 2, 225 at 4, so a pass over
  2 tokens costs 1.16 single passes and over 4, 1.41), and llama.cpp issue #3479 (vLLM on an A100:
  46 t/s at batch 1, 400 at batch 10, a pass over 10 tokens 1.15 single passes). Here 1.1 at 2
  tokens, rising to 1.5 at 17 and 2.2 at 33. The draft step is 0.55 of a target pass: small models on
  a GPU are bound by kernel launches more than by their weights, so a 0.5B step is not a third of a
  1.5B one (an assumption, not a measurement).
- "avx2": a 2-core AMD EPYC 7003 (Zen 3: AVX2, no AVX-512), demo pair, as `tandem bench --replay`
  timed it on 2026-12-01 (a single pass 57 ms, slower than the steep machine's 37, so a check of a
  few tokens costs fewer single passes: 5 tokens 2.6); each size the median of the sizes either side
  of it, as single timings scatter (16, 17, 18 tokens: 385, 573, 490 ms); 33 tokens the mean of
  the 32- and 33-token timings. Its draft step, 0.55 of a pass, is the c that the same bench
  measured in its draft-model runs at γ = 2 and 4 (0.49-0.62, median 0.56): the load-time timing
  of a bare step, 23.5 ms (0.41), leaves out the loop's own work per step, and with it the replay
  had the draft model at γ = 4 pay on the code prompt (1.04x plain) where the live runs had it at
  0.94x.
- "h200": an NVIDIA H200, llama.cpp's llama-bench built for CUDA (sm_90), the demo pair's shapes with
  zero weights (scripts/gpu_costs/run.sh, 2026-12-04): passes of 1, 2, 3, 5, 9, 17 and 33 tokens at a
  depth of 256 cost 1.84, 2.15, 2.33, 2.83, 4.08, 4.38 and 5.08 ms (the means of three runs of 100),
  so 17 tokens 2.4 single passes and 33 tokens 2.8, steeper than the "gpu" profile's 1.5 and 2.2 (a
  step at 9 tokens, where llama.cpp's CUDA matrix products change kernels); the draft's step 1.21 ms,
  0.66 of a target pass ("gpu": 0.55). Its prompt costs are the "gpu" profile's (not measured). The
  one GPU measured; "gpu" stays beside it for the flatter curves others have reported.
- "here": measured on the machine at hand when a trace is recorded (trace.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping

from desktop_app.engine.costs import CostModel


@dataclass(frozen=True)
class CostProfile:
    name: str
    source: str
    verify_ms: Mapping[int, float]                 # batch size -> ms of one pass, logits at every position
    draft_step_ms: float                           # one draft-model step
    prefill_ms: Mapping[str, float] = field(default_factory=dict)   # "target"/"model" -> ms per prompt token

    def cost_model(self) -> CostModel:
        """A CostModel holding this profile's costs, in seconds."""
        return CostModel(verify_s={b: ms / 1000 for b, ms in self.verify_ms.items()},
                         draft_step_s={"model": self.draft_step_ms / 1000, "lookup": 0.0, "none": 0.0},
                         prefill_s={k: ms / 1000 for k, ms in self.prefill_ms.items()})

    def verify_s(self, batch: int) -> float:
        return self._costs.verify_cost(batch)

    def read_s(self, model: str, n_tokens: int) -> float:
        """Seconds to read n_tokens through "target" or "model" (CostModel.prefill_cost)."""
        return self._costs.prefill_cost(model, n_tokens)

    @cached_property
    def _costs(self) -> CostModel:
        return self.cost_model()

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.source, "verify_ms": {str(b): ms for b, ms in self.verify_ms.items()},
                "draft_step_ms": self.draft_step_ms, "prefill_ms": dict(self.prefill_ms)}

    @classmethod
    def from_json(cls, d: dict) -> "CostProfile":
        return cls(d["name"], d.get("source", ""), {int(b): float(ms) for b, ms in d["verify_ms"].items()},
                   float(d["draft_step_ms"]), {k: float(v) for k, v in d.get("prefill_ms", {}).items()})


_STEEP_PASS = 37.0
STEEP = CostProfile(
    "steep", "2-core AMD EPYC, demo pair: docs/performance.md 'What it means' (1 token 37 ms; 2: 1.85x, 4: 2.5x, "
    "5: 3.6x, 7: 179 ms, 8: 238 ms, 15: 341 ms, 16: 7.6x, 17: 8.6x, 32: 12x); draft step 0.6 of a pass; "
    "prompt 8.8 and 4.7 ms per token (an earlier docs/bench-demo.md run, edit prompt TTFT)",
    {1: _STEEP_PASS, 2: 1.85 * _STEEP_PASS, 4: 2.5 * _STEEP_PASS, 5: 3.6 * _STEEP_PASS, 7: 179.0, 8: 238.0,
     15: 341.0, 16: 7.6 * _STEEP_PASS, 17: 8.6 * _STEEP_PASS, 32: 12.0 * _STEEP_PASS, 33: 12.4 * _STEEP_PASS},
    0.6 * _STEEP_PASS, {"target": 8.8, "model": 4.7})

XEON = CostProfile(
    "xeon", "2-core Intel Xeon, repacking off: llama-bench pp1/2/3/5/9/17/33 = 80/108/133/178/223/299/391 ms "
    "(issue #14); prompt 4.7 and 3.5 ms per token from its TTFT; draft step assumed 0.45 of a pass",
    {1: 80.0, 2: 108.0, 3: 133.0, 5: 178.0, 9: 223.0, 17: 299.0, 33: 391.0},
    0.45 * 80.0, {"target": 4.7, "model": 3.5})

_GPU_PASS = 4.0
GPU = CostProfile(
    "gpu", "GPU-like: a verify of up to 17 tokens costs 1.1-1.5 single passes (llama.cpp PR #16894's "
    "llama-batched-bench, issue #3479's vLLM figures); draft step 0.55 of a pass (assumed); prompt 0.05 and "
    "0.03 ms per token",
    {1: _GPU_PASS, 2: 1.1 * _GPU_PASS, 5: 1.2 * _GPU_PASS, 9: 1.3 * _GPU_PASS, 17: 1.5 * _GPU_PASS,
     33: 2.2 * _GPU_PASS},
    0.55 * _GPU_PASS, {"target": 0.05, "model": 0.03})

H200 = CostProfile(
    "h200", "NVIDIA H200, llama.cpp llama-bench (CUDA, sm_90), the demo pair's shapes, zero weights "
    "(scripts/gpu_costs/run.sh): 1/2/3/5/9/17/33 tokens at depth 256 = 1.84/2.15/2.33/2.83/4.08/4.38/5.08 ms; "
    "draft step 1.21 ms (0.66 of a pass); prompt 0.05 and 0.03 ms per token (the gpu profile's, not measured)",
    {1: 1.838, 2: 2.150, 3: 2.329, 5: 2.828, 9: 4.082, 17: 4.380, 33: 5.076},
    1.205, {"target": 0.05, "model": 0.03})

AVX2 = CostProfile(
    "avx2", "2-core AMD EPYC 7003 (Zen 3, AVX2, no AVX-512), demo pair: tandem bench --replay's timings, each size "
    "the median of it and its neighbours (1 token 57 ms; 5: 2.6x; 17: 8.6x); draft step 0.55 of a pass (the c "
    "measured in that bench's draft-model runs); prompt 16.5 and 7.3 ms per token (the same bench's timing of a "
    "64-token prompt pass through each model)",
    {1: 57.3, 2: 91.1, 3: 118.6, 5: 151.3, 9: 323.8, 17: 490.1, 33: 812.0},
    0.55 * 57.3, {"target": 16.5, "model": 7.3})

BUILTIN = {p.name: p for p in (STEEP, XEON, GPU, AVX2, H200)}
