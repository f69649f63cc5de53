"""Which fact extractor the configuration gives: none (the rule splitter) by default; a configured
GGUF that does not load refuses to start rather than silently judging by rules."""

import pytest

from retrieval.conversation.capture import CaptureParams
from serving.extractor import build_extractor
from serving.interface import SelectorLoadError


def test_no_model_configured_means_the_rule_splitter(monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert build_extractor(CaptureParams()) is None
    assert build_extractor(CaptureParams(extractor_ollama="qwen2.5:7b")) is None  # Ollama unreachable, no GGUF


def test_a_configured_gguf_that_does_not_load_is_a_load_error(tmp_path, monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    with pytest.raises(SelectorLoadError, match="GGUF not found"):
        build_extractor(CaptureParams(extractor_gguf=str(tmp_path / "missing.gguf")))
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 1000)
    with pytest.raises(SelectorLoadError):
        build_extractor(CaptureParams(extractor_gguf=str(broken)))
