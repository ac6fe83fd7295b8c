"""Tests of lib.pt.blocks: each block against torch.nn.TransformerEncoderLayer / TransformerDecoderLayer with
the same weights, parameter counts by formula against torch, masks (causal, padding) and cross-attention."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import lib.pt.blocks as B
from lib.pt.attention import causal_mask, padding_mask

ENC = [(B.PostLNEncoderBlock, False), (B.PreLNEncoderBlock, True)]
DEC = [(B.PostLNDecoderBlock, False), (B.PreLNDecoderBlock, True)]
# float64 throughout: the two implementations differ only in rounding.
ATOL = 1e-12


def _torch_enc(nf, d=16, h=4, d_ff=32):
    return torch.nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True, norm_first=nf,
                                            dtype=torch.float64).eval()


def _torch_dec(nf, d=16, h=4, d_ff=32):
    return torch.nn.TransformerDecoderLayer(d, h, d_ff, dropout=0.0, batch_first=True, norm_first=nf,
                                            dtype=torch.float64).eval()


@pytest.mark.parametrize("cls,nf", ENC, ids=lambda c: getattr(c, "__name__", str(c)))
def test_encoder_block_matches_torch_layer_with_padding(cls, nf):
    torch.manual_seed(0)
    ref = _torch_enc(nf)
    blk = B.load_from_torch_layer(cls(16, 4, 32).double(), ref)
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    lengths = torch.tensor([5, 3, 1])
    m = padding_mask(lengths, 5)[:, None]  # (B, 1, 1, n)
    with torch.no_grad():
        # torch's key_padding_mask is True = IGNORE: the opposite of the book's convention
        want = ref(x, src_key_padding_mask=~m[:, 0, 0])
        got = blk(x, m)
    valid = m[:, 0, 0]  # torch's fast path may zero the padded rows; compare the real tokens
    torch.testing.assert_close(got[valid], want[valid], rtol=0, atol=ATOL)
    assert B.encoder_layer_param_count(16, 4, 32) == sum(p.numel() for p in blk.parameters())


@pytest.mark.parametrize("cls,nf", DEC, ids=lambda c: getattr(c, "__name__", str(c)))
def test_decoder_block_matches_torch_layer_with_causal_and_memory_masks(cls, nf):
    torch.manual_seed(1)
    ref = _torch_dec(nf)
    blk = B.load_from_torch_layer(cls(16, 4, 32).double(), ref)
    x, mem = torch.randn(3, 4, 16, dtype=torch.float64), torch.randn(3, 6, 16, dtype=torch.float64)
    m = padding_mask(torch.tensor([6, 2, 4]), 6)[:, None]
    with torch.no_grad():
        want = ref(x, mem, tgt_mask=~causal_mask(4), memory_key_padding_mask=~m[:, 0, 0])
        got = blk(x, mem, causal_mask(4), m)
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL)
    assert B.decoder_layer_param_count(16, 4, 32) == sum(p.numel() for p in blk.parameters())


def test_base_model_layer_counts_match_torch():
    enc = torch.nn.TransformerEncoderLayer(512, 8, 2048)
    dec = torch.nn.TransformerDecoderLayer(512, 8, 2048)
    assert B.encoder_layer_param_count(512, 8, 2048) == sum(p.numel() for p in enc.parameters()) == 3_152_384
    assert B.decoder_layer_param_count(512, 8, 2048) == sum(p.numel() for p in dec.parameters()) == 4_204_032
    assert sum(p.numel() for p in B.PostLNEncoderBlock(512, 8, 2048).parameters()) == 3_152_384
    assert sum(p.numel() for p in B.PreLNDecoderBlock(512, 8, 2048).parameters()) == 4_204_032
    # without biases only the weights and the LayerNorms remain
    assert B.encoder_layer_param_count(512, 8, 2048, bias=False) == 4 * 512**2 + 2 * 512 * 2048 + 4 * 512


@pytest.mark.parametrize("cls", [B.PostLNDecoderBlock, B.PreLNDecoderBlock])
def test_causal_decoder_output_at_t_ignores_later_tokens(cls):
    torch.manual_seed(2)
    blk = cls(8, 2, 16).double().eval()
    x, mem = torch.randn(1, 6, 8, dtype=torch.float64), torch.randn(1, 4, 8, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, 2, 8, dtype=torch.float64)  # change the future of positions 0..3
    with torch.no_grad():
        y, y2 = blk(x, mem, causal_mask(6)), blk(x2, mem, causal_mask(6))
        torch.testing.assert_close(y[:, :4], y2[:, :4], rtol=0, atol=0)
        # ... and without the mask the past does see the future
        z, z2 = blk(x, mem), blk(x2, mem)
    assert (z[:, :4] - z2[:, :4]).abs().max() > 1e-3


@pytest.mark.parametrize("cls", [B.PostLNEncoderBlock, B.PreLNEncoderBlock])
def test_padding_mask_makes_output_independent_of_padding(cls):
    torch.manual_seed(3)
    blk = cls(8, 2, 16).double().eval()
    x = torch.randn(1, 3, 8, dtype=torch.float64)
    outs = []
    for extra in (0, 2, 5):
        xp = torch.cat([x, torch.randn(1, extra, 8, dtype=torch.float64)], dim=1)
        with torch.no_grad():
            outs.append((blk(xp, padding_mask(torch.tensor([3]), 3 + extra)[:, None])[:, :3], blk(xp)[:, :3]))
    for masked, unmasked in outs[1:]:
        torch.testing.assert_close(masked, outs[0][0], rtol=0, atol=1e-14)
        assert (unmasked - outs[0][1]).abs().max() > 1e-3


def test_cross_attention_reads_memory_and_is_permutation_invariant_in_it():
    torch.manual_seed(4)
    blk = B.PostLNDecoderBlock(8, 2, 16).double().eval()
    x, mem = torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(2, 5, 8, dtype=torch.float64)
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        y = blk(x, mem, causal_mask(3))
        # keys and values permuted together: attention is a weighted sum, order of the memory does not matter
        torch.testing.assert_close(blk(x, mem[:, perm], causal_mask(3)), y, rtol=0, atol=1e-12)
        assert (blk(x, mem + 1.0, causal_mask(3)) - y).abs().max() > 1e-3  # but its content does


def test_encoder_block_is_permutation_equivariant_without_positions():
    torch.manual_seed(5)
    blk = B.PreLNEncoderBlock(8, 2, 16).double().eval()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    perm = torch.randperm(6)
    with torch.no_grad():
        torch.testing.assert_close(blk(x[:, perm]), blk(x)[:, perm], rtol=0, atol=1e-12)


def test_gradients_reach_every_parameter():
    torch.manual_seed(6)
    blk = B.PreLNDecoderBlock(8, 2, 16)
    blk(torch.randn(2, 3, 8), torch.randn(2, 4, 8), causal_mask(3)).sum().backward()
    for name, p in blk.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_bad_inputs_raise_clear_errors():
    enc, dec = B.PostLNEncoderBlock(8, 2, 16), B.PostLNDecoderBlock(8, 2, 16)
    with pytest.raises(ValueError, match=r"x must be a tensor of shape \(B, n, d_model=8\)"):
        enc(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match=r"memory must be a tensor of shape \(B, n, d_model=8\)"):
        dec(torch.randn(2, 3, 8), torch.randn(2, 3))
    with pytest.raises(ValueError, match="memory has batch 1 but x has batch 2"):
        dec(torch.randn(2, 3, 8), torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="does not broadcast"):
        enc(torch.randn(2, 3, 8), torch.ones(2, 1, 1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="not divisible by n_heads"):
        B.PreLNEncoderBlock(10, 3, 16)
    with pytest.raises(TypeError, match="cannot load a TransformerEncoderLayer"):
        B.load_from_torch_layer(dec, torch.nn.TransformerEncoderLayer(8, 2, 16))
    with pytest.raises(ValueError, match="LayerNorm placement differs"):
        B.load_from_torch_layer(enc, torch.nn.TransformerEncoderLayer(8, 2, 16, norm_first=True))
    with pytest.raises(ValueError, match="sizes differ"):
        B.load_from_torch_layer(enc, torch.nn.TransformerEncoderLayer(8, 2, 32))
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        B.encoder_layer_param_count(0, 1, 4)


@given(batch=st.integers(1, 3), n_src=st.integers(1, 6), n_tgt=st.integers(1, 5), h=st.sampled_from([1, 2, 4]),
       d_k=st.integers(1, 4), d_ff=st.integers(1, 12), norm_first=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_blocks_match_torch_for_random_shapes(batch, n_src, n_tgt, h, d_k, d_ff, norm_first, seed):
    torch.manual_seed(seed)
    d = h * d_k
    kw = dict(dropout=0.0, batch_first=True, norm_first=norm_first, dtype=torch.float64)
    ref_enc = torch.nn.TransformerEncoderLayer(d, h, d_ff, **kw).eval()
    ref_dec = torch.nn.TransformerDecoderLayer(d, h, d_ff, **kw).eval()
    enc_cls, dec_cls = (B.PreLNEncoderBlock, B.PreLNDecoderBlock) if norm_first else (
        B.PostLNEncoderBlock, B.PostLNDecoderBlock)
    enc = B.load_from_torch_layer(enc_cls(d, h, d_ff).double(), ref_enc)
    dec = B.load_from_torch_layer(dec_cls(d, h, d_ff).double(), ref_dec)
    x, y = torch.randn(batch, n_src, d, dtype=torch.float64), torch.randn(batch, n_tgt, d, dtype=torch.float64)
    lengths = torch.randint(1, n_src + 1, (batch,))  # at least one real token per sequence
    keep = padding_mask(lengths, n_src)[:, None]
    with torch.no_grad():
        mem_ref = ref_enc(x, src_key_padding_mask=~keep[:, 0, 0])
        mem = enc(x, keep)
        real = keep[:, 0, 0]
        torch.testing.assert_close(mem[real], mem_ref[real], rtol=0, atol=1e-11)
        out_ref = ref_dec(y, mem, tgt_mask=~causal_mask(n_tgt), memory_key_padding_mask=~keep[:, 0, 0])
        torch.testing.assert_close(dec(y, mem, causal_mask(n_tgt), keep), out_ref, rtol=0, atol=1e-11)


def test_float32_blocks_agree_with_float64_within_stated_tolerance():
    torch.manual_seed(7)
    blk64 = B.PreLNDecoderBlock(32, 4, 64).double().eval()
    blk32 = B.PreLNDecoderBlock(32, 4, 64).eval()
    blk32.load_state_dict({k: v.float() for k, v in blk64.state_dict().items()})
    x, mem = torch.randn(2, 5, 32, dtype=torch.float64), torch.randn(2, 7, 32, dtype=torch.float64)
    with torch.no_grad():
        y64 = blk64(x, mem, causal_mask(5))
        y32 = blk32(x.float(), mem.float(), causal_mask(5))
    assert y32.dtype == torch.float32
    torch.testing.assert_close(y32.double(), y64, rtol=0, atol=2e-5)
