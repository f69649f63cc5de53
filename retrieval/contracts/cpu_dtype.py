"""The precision a model runs in on this CPU (the cross-encoder's `train_ce.serve_dtype`)."""

from __future__ import annotations

CE_DTYPES = ("auto", "float32", "bfloat16")  # the cross-encoder's serving precision (`train_ce.serve_dtype`)


def ce_dtype(name: str) -> str:
    """The precision a cross-encoder runs in: `auto` = bfloat16 where the CPU computes it natively
    (AVX512-BF16 or AMX), else float32. Emulated bfloat16 would be slower than float32."""
    import torch

    if name not in CE_DTYPES:
        raise ValueError(f"cross-encoder dtype {name!r}: expected one of {', '.join(CE_DTYPES)}")
    if name != "auto":
        return name
    native = any(
        getattr(torch.cpu, f, lambda: False)() for f in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    )
    return "bfloat16" if native else "float32"
