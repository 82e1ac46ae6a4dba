#!/usr/bin/python3
"""Checks reference_eva.forward_meta_dinov3 against facebookresearch/dinov3's own DinoVisionTransformer, where a
checkout of it is at hand (not part of the suite). On Debian's torch 1.13 the repository needs three shims:
torch._dynamo and torch.compiler stand-ins for its decorators, and F.scaled_dot_product_attention written out
(softmax(q k^T / sqrt(d)) v, what it computes without a mask).

Usage: /usr/bin/python3 tests/python/check_meta_dinov3_reference.py DINOV3_CHECKOUT EVA_CASES_DIR
"""
import sys, math, torch, numpy as np, json, os, types
if not hasattr(torch, "_dynamo"):
    torch._dynamo = types.SimpleNamespace(config=types.SimpleNamespace())
if not hasattr(torch, "compiler"):
    torch.compiler = types.SimpleNamespace(disable=lambda f=None, **k: (f if f else (lambda g: g)), allow_in_graph=lambda f: f)
import torch.nn.functional as F
if not hasattr(F, "scaled_dot_product_attention"):
    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else q.shape[-1] ** -0.5)
        return s.softmax(-1) @ v
    F.scaled_dot_product_attention = sdpa
sys.path.insert(0, sys.argv[1])
from dinov3.models.vision_transformer import DinoVisionTransformer
folder = sys.argv[2]
for c in json.load(open(os.path.join(folder, 'layout_cases.json'))):
    if c['layout'] != 'dinov3': continue
    sd = torch.load(os.path.join(folder, c['model']))
    swiglu = any('mlp.w1' in k for k in sd)
    m = DinoVisionTransformer(img_size=64, patch_size=16, embed_dim=64, depth=2, num_heads=4, ffn_ratio=4 * 3 / 2 if swiglu else 4,
                              qkv_bias=True, layerscale_init=1e-5, norm_layer='layernormbf16', ffn_layer='swiglu' if swiglu else 'mlp',
                              n_storage_tokens=4, mask_k_bias=True, pos_embed_rope_base=100, pos_embed_rope_dtype='fp32')
    print(m.load_state_dict(sd, strict=True))
    m = m.double().eval()
    img = torch.from_numpy(np.load(os.path.join(folder, c['input']))).double()
    with torch.no_grad():
        out = m(img)
    ref = torch.from_numpy(np.load(os.path.join(folder, c['output']))).double()
    print(c['name'], (out - ref).abs().max().item() / ref.abs().max().item())
