"""Encoder-decoders, speech and vision-language models: the whole model counted, and per request the decoder's
self-attention cache per generated token and the cross-attention cache per source position.

The oracle is transformers itself: each fixture (tests/fixtures/encoder_decoder/, sources in SOURCES.md) is built
here with the auto class its task names (sequence-to-sequence, speech-to-text, image-text-to-text) on the meta
device and its parameters summed; the caches are derived from the config's own fields (heads x head width of the
decoder), independently of the modules the engine reads.
"""

from __future__ import annotations

import json
import warnings
from functools import cache
from pathlib import Path

import pytest
import torch
import transformers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoModelForSeq2SeqLM,
    AutoModelForSpeechSeq2Seq,
)

from lib.planner import engine
from lib.sizing import main

FIXTURES = Path(__file__).parent / "fixtures" / "encoder_decoder"
FILES = sorted(FIXTURES.glob("*.config.json"))
AUTO = {"bart": AutoModelForSeq2SeqLM, "t5": AutoModelForSeq2SeqLM, "mbart": AutoModelForSeq2SeqLM,
        "marian": AutoModelForSeq2SeqLM, "m2m_100": AutoModelForSeq2SeqLM, "whisper": AutoModelForSpeechSeq2Seq,
        "blip": AutoModelForImageTextToText, "llava": AutoModelForImageTextToText}

transformers.logging.set_verbosity_error()


@cache
def _built(name: str):
    raw = json.loads((FIXTURES / f"{name}.config.json").read_text())
    fields = {k: v for k, v in raw.items() if k not in ("model_type", "architectures", "transformers_version",
                                                        "torch_dtype")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = AutoConfig.for_model(raw["model_type"], **fields)
        with torch.device("meta"):
            model = AUTO.get(raw["model_type"], AutoModelForCausalLM).from_config(cfg)
    return raw, cfg, model


def _decoder_widths(cfg) -> tuple[int, int]:
    """(decoder layers, K + V elements per token of one decoder layer) from the config's fields."""
    if cfg.model_type == "t5":
        return cfg.num_decoder_layers, 2 * cfg.num_heads * cfg.d_kv
    if cfg.model_type == "blip":
        return cfg.text_config.num_hidden_layers, 2 * cfg.text_config.hidden_size
    if cfg.model_type == "llava":
        t = cfg.text_config
        return t.num_hidden_layers, 2 * t.num_key_value_heads * (t.hidden_size // t.num_attention_heads)
    return cfg.decoder_layers, 2 * cfg.d_model  # BART, mBART, Marian, M2M-100/NLLB, Whisper: heads x width = d_model


@pytest.mark.parametrize("path", FILES, ids=[f.name.removesuffix(".config.json") for f in FILES])
def test_whole_model_and_caches_equal_transformers(path: Path) -> None:
    name = path.name.removesuffix(".config.json")
    raw, cfg, model = _built(name)
    m = engine.describe(raw)
    assert m.total == sum(p.numel() for p in model.parameters())
    layers, per_token = _decoder_widths(cfg)
    assert len(m.layers) == layers
    assert engine.kv_bytes_per_token(m, "fp16") == 2 * layers * per_token
    if m.source_tokens:  # cross-attention: the same widths per source position, computed once per request
        assert sum(la.cross_kv_per_token for la in m.layers) == layers * per_token
        assert engine.state_bytes_per_sequence(m, "fp16") == 2 * layers * per_token * m.source_tokens
    else:
        assert name == "llava-1.5-7b-hf" and engine.state_bytes_per_sequence(m) == 0


def test_the_issue_figures() -> None:
    """bart-large-cnn 406,291,456 parameters (not the decoder's 254,084,096) and 49,152 B per source token at fp16;
    whisper-small 241,734,912 and 55.3 MB per 30-second window; whisper-large-v3-turbo's 32 encoder and 4
    decoder layers."""
    bart = engine.describe(_built("bart-large-cnn")[0])
    assert bart.total == 406_291_456
    assert sum(la.cross_kv_per_token for la in bart.layers) * 2 == 49_152
    small = engine.describe(_built("whisper-small")[0])
    assert small.total == 241_734_912 and small.source_tokens == 1500
    assert engine.state_bytes_per_sequence(small, "fp16") == 55_296_000
    _, cfg, model = _built("whisper-large-v3-turbo")
    turbo = engine.describe(_built("whisper-large-v3-turbo")[0])
    assert (len(model.model.encoder.layers), len(turbo.layers)) == (32, 4)
    assert turbo.encoder_params == sum(p.numel() for p in model.model.encoder.parameters())


def test_report_names_both_caches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(FIXTURES / "bart-large-cnn.config.json"), "--dtype", "fp16", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["parameters"]["total"] == 406_291_456
    ed = r["encoder_decoder"]
    assert ed["cross_attention_bytes_per_source_token"] == 49_152 == ed["self_attention_bytes_per_generated_token"]
    assert ed["source_tokens"] == 1024 and r["state_bytes_per_sequence"] == 49_152 * 1024
    assert main([str(FIXTURES / "t5-small.config.json")]) == 0
    text = capsys.readouterr().out
    assert "cross-attention cache per request" in text and "60,506,624 total" in text
