"""The precision a cross-encoder runs in on this CPU: `auto` is bfloat16 only where the CPU computes it."""

from pathlib import Path

import pytest

from retrieval.contracts.cpu_dtype import ce_dtype


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="reads the CPU flags from /proc/cpuinfo")
def test_auto_precision_is_bfloat16_only_where_the_cpu_computes_it():
    flags = {f for line in open("/proc/cpuinfo") if line.startswith("flags") for f in line.split(":", 1)[1].split()}
    assert ce_dtype("auto") == ("bfloat16" if flags & {"avx512_bf16", "amx_bf16"} else "float32")
    assert (ce_dtype("float32"), ce_dtype("bfloat16")) == ("float32", "bfloat16")
    with pytest.raises(ValueError, match="float16"):
        ce_dtype("float16")
