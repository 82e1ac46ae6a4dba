#!/usr/bin/python3
"""Generate attnscope's SigLIP text-side parity cases: SigLIP files with their text towers and SentencePiece
vocabularies in the layouts researchers have, prompts, their token ids, and float64 reference outputs.

Usage: /usr/bin/python3 tests/python/make_siglip_text_cases.py OUTDIR

Independent of the C++ sources. The tokenizer reference is reference_siglip_tokenizer.py (written from
transformers' SiglipTokenizer and GemmaTokenizerFast, and open_clip's HFTokenizer); the towers' reference is
written here from transformers' modeling_siglip.py (SiglipTextTransformer: token plus position embeddings, pre-LN
blocks without a causal mask, final_layer_norm, the last position, head) and open_clip's transformer.py
(TextTransformer with no_causal_mask, pool_type 'last', proj_bias), with SiglipModel's scores:
logit_scale.exp() * cos + logit_bias, each prompt's sigmoid. The vision towers are reference_eva.py's. The
vocabularies are SentencePiece models trained here on a small corpus, with the ids the released ones have: T5's
(<pad> 0, </s> 1, <unk> 2, unigram with the dummy prefix) and Gemma's (<pad> 0, <eos> 1, <bos> 2, <unk> 3, BPE with
byte fallback, no dummy prefix, no normalisation).

OUTDIR layout:
  hf_siglip/        transformers' SiglipModel folder: model.safetensors (vision and text towers, logit_scale and
                    logit_bias as [1]), config.json, spiece.model (T5's kind); text context 64
  hf_siglip2/       the same with tokenizer.model (Gemma's kind: transformers' GemmaTokenizerFast, lower-cased as
                    SigLIP 2 was trained) and a context of 16 (SigLIP So400m's)
  open_clip_siglip/ an open_clip folder: open_clip_config.json (a timm trunk with map pooling and no projection;
                    the text tower non-causal, pooled last, proj_bias, eps 1e-6, tanh GELU), open_clip_model.safetensors
                    (visual.trunk.*, text.*), tokenizer.model (Gemma's kind: open_clip's canonicalize rules)
  no_vocabulary/    hf_siglip's weights without spiece.model (refused, naming it)
  <case>.image.npy            float32 [1, 3, 64, 64], normalised
  <case>.ids.npy              int64 [P, context]: the prompts' ids by the case's rules
  <case>.text_embeddings.npy  float64 [P, E]
  <case>.image_embedding.npy  float64 [E]
  <case>.logits.npy           float64 [P]: logit_scale.exp() * cos + logit_bias
  <case>.probabilities.npy    float64 [P]: their sigmoids
  <case>.legrad_raw.npy       float64 [gh, gw]: LeGrad's compute_legrad_siglip of prompt 0 (the corrected sum)
  <case>.legrad_upsampled.npy float64 [H, W]: min-max, then bilinear by the patch size
  cases.json  {cases: [{name, model, rules, context, heads, prompts, files}], wrong_readings: {...}}
"""

import json
import math
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import sentencepiece as spm
import torch

import reference_eva as ref
import reference_hub_vit as hub
import reference_siglip_tokenizer as tok
import safetensors_io
from fixture_tools import Init, output_folder
from make_eva_cases import HEADS, WIDTH, hf_siglip_keys, make_state
from make_hub_cases import smooth_image

TEXT_LAYERS, TEXT_HEADS, TEXT_HIDDEN = 2, 4, 128

CORPUS = ["A photo of a cat.", "A photo of a dog!", "a photo of two cats sleeping on a sofa",
          "The real mountain view in Zurich and the Alps.", "San Francisco bay at night, long exposure",
          "a picture of a laptop with the lockscreen on, a cup of coffee, salt and pepper", "sea waves at sunset",
          "It's a bird, it's a plane", "This is a photo of a lion.", "a red car parked next to a blue house",
          "black and white photograph of a street", "a close-up photo of a small brown bird on a branch",
          "a painting of a ship in a storm", "a stop sign", "a yield sign", "a speed limit sign"]

# Capitals, punctuation, runs of white space, underscores, an entity, digits, a literal end token, non-ASCII.
PROMPTS = ["a photo of a cat", "A Photo of a DOG!!", "  sea   waves\tat sunset  ", "a_stop_sign (HDR) &amp; 4K",
           "It's a bird, it's a plane", "hi</s>", "Zürich at night", "a speed limit sign, 30 km/h",
           "A CAT!!", "  a\tdog  ", "a_sign &amp; 4K", "It's a Bird", "<eos>a ship"]


def train_vocabularies(out):
    corpus = [s for s in CORPUS for _ in range(30)] + [s.lower() for s in CORPUS for _ in range(30)]
    t5 = os.path.join(out, "t5_kind")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_prefix=t5, model_type="unigram",
                                   vocab_size=180, hard_vocab_limit=False, minloglevel=2, pad_id=0, eos_id=1,
                                   unk_id=2, bos_id=-1, pad_piece="<pad>", eos_piece="</s>", unk_piece="<unk>")
    gemma = os.path.join(out, "gemma_kind")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_prefix=gemma, model_type="bpe",
                                   vocab_size=600, hard_vocab_limit=False, minloglevel=2, pad_id=0, eos_id=1, bos_id=2,
                                   unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
                                   unk_piece="<unk>", user_defined_symbols=["<mask>"], add_dummy_prefix=False,
                                   remove_extra_whitespaces=False, normalization_rule_name="identity",
                                   byte_fallback=True, split_digits=True)
    return t5 + ".model", gemma + ".model"


def text_state(r, vocab, context, width, embed, prefix, names):
    """A text tower's weights. names: 'hf' (SiglipTextTransformer's keys) or 'open_clip' (OpenAI's keys under
    text., nn.MultiheadAttention's in_proj, a Linear text_projection)."""
    sd = {}
    C = width
    if names == "hf":
        sd[prefix + "embeddings.token_embedding.weight"] = r.normal([vocab, C], 0.5)
        sd[prefix + "embeddings.position_embedding.weight"] = r.normal([context, C], 0.3)
    else:
        sd[prefix + "token_embedding.weight"] = r.normal([vocab, C], 0.5)
        sd[prefix + "positional_embedding"] = r.normal([context, C], 0.3)
    for i in range(TEXT_LAYERS):
        if names == "hf":
            b = f"{prefix}encoder.layers.{i}."
            norms, proj, fc = ("layer_norm1", "layer_norm2"), b + "self_attn.", ("mlp.fc1", "mlp.fc2")
            for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                gain = 1.8 if n in ("q_proj", "k_proj") else 1.0
                sd[proj + n + ".weight"] = r.normal([C, C], gain / math.sqrt(C))
                sd[proj + n + ".bias"] = r.normal([C], 0.02)
        else:
            b = f"{prefix}transformer.resblocks.{i}."
            norms, fc = ("ln_1", "ln_2"), ("mlp.c_fc", "mlp.c_proj")
            sd[b + "attn.in_proj_weight"] = torch.cat([r.normal([C, C], 1.8 / math.sqrt(C)),
                                                       r.normal([C, C], 1.8 / math.sqrt(C)),
                                                       r.normal([C, C], 1.0 / math.sqrt(C))])
            sd[b + "attn.in_proj_bias"] = r.normal([3 * C], 0.02)
            sd[b + "attn.out_proj.weight"] = r.normal([C, C], 1.0 / math.sqrt(C))
            sd[b + "attn.out_proj.bias"] = r.normal([C], 0.02)
        for n in norms:
            sd[b + n + ".weight"] = r.normal([C], 0.1, 1.0)
            sd[b + n + ".bias"] = r.normal([C], 0.05)
        sd[b + fc[0] + ".weight"] = r.normal([TEXT_HIDDEN, C], 3.0 / math.sqrt(C))  # wide pre-activations: GELU's forms differ
        sd[b + fc[0] + ".bias"] = r.normal([TEXT_HIDDEN], 0.02)
        sd[b + fc[1] + ".weight"] = r.normal([C, TEXT_HIDDEN], 1.0 / math.sqrt(TEXT_HIDDEN))
        sd[b + fc[1] + ".bias"] = r.normal([C], 0.02)
    final = prefix + ("final_layer_norm" if names == "hf" else "ln_final")
    sd[final + ".weight"] = r.normal([C], 0.1, 1.0)
    sd[final + ".bias"] = r.normal([C], 0.05)
    head = prefix + ("head" if names == "hf" else "text_projection")
    sd[head + ".weight"] = r.normal([embed, C], 1.0 / math.sqrt(C))
    sd[head + ".bias"] = r.normal([embed], 0.1)
    return sd


def text_forward(sd, ids, names, heads, eps, act, causal=False, pool_last=True):
    """SiglipTextTransformer.forward (names 'hf') or open_clip's TextTransformer.forward (names 'open_clip') in
    float64: embeddings, pre-LN blocks (no mask: SigLIP passes none), the final norm, the last position, the
    head. causal / pool_last: the wrong readings the cases show to matter."""
    p = {k: v.to(torch.float64) for k, v in sd.items()}
    if names == "hf":
        p = {k[len("text_model."):]: v for k, v in p.items() if k.startswith("text_model.")}
        x = p["embeddings.token_embedding.weight"][ids] + p["embeddings.position_embedding.weight"][: ids.shape[1]]
    else:
        p = {k[len("text."):]: v for k, v in p.items() if k.startswith("text.")}
        x = p["token_embedding.weight"][ids] + p["positional_embedding"][: ids.shape[1]]
    P, L, C = x.shape
    d = C // heads
    mask = torch.full((L, L), float("-inf"), dtype=torch.float64).triu(1) if causal else torch.zeros(L, L,
                                                                                                    dtype=torch.float64)
    for i in range(TEXT_LAYERS):
        if names == "hf":
            b = f"encoder.layers.{i}."
            ln1, ln2, fc1, fc2 = "layer_norm1", "layer_norm2", "mlp.fc1", "mlp.fc2"
            q_w, k_w, v_w = (p[b + f"self_attn.{n}_proj.weight"] for n in "qkv")
            q_b, k_b, v_b = (p[b + f"self_attn.{n}_proj.bias"] for n in "qkv")
            o_w, o_b = p[b + "self_attn.out_proj.weight"], p[b + "self_attn.out_proj.bias"]
        else:
            b = f"transformer.resblocks.{i}."
            ln1, ln2, fc1, fc2 = "ln_1", "ln_2", "mlp.c_fc", "mlp.c_proj"
            q_w, k_w, v_w = p[b + "attn.in_proj_weight"].chunk(3)
            q_b, k_b, v_b = p[b + "attn.in_proj_bias"].chunk(3)
            o_w, o_b = p[b + "attn.out_proj.weight"], p[b + "attn.out_proj.bias"]
        h = hub.layer_norm(x, p[b + ln1 + ".weight"], p[b + ln1 + ".bias"], eps)

        def split(t):
            return t.reshape(P, L, heads, d).permute(0, 2, 1, 3)

        q, k, v = split(hub.linear(h, q_w, q_b)), split(hub.linear(h, k_w, k_b)), split(hub.linear(h, v_w, v_b))
        probs = hub.softmax((q @ k.transpose(-1, -2)) * d ** -0.5 + mask)
        x = x + hub.linear((probs @ v).permute(0, 2, 1, 3).reshape(P, L, C), o_w, o_b)
        h = hub.layer_norm(x, p[b + ln2 + ".weight"], p[b + ln2 + ".bias"], eps)
        x = x + hub.linear(act(hub.linear(h, p[b + fc1 + ".weight"], p[b + fc1 + ".bias"])), p[b + fc2 + ".weight"],
                           p[b + fc2 + ".bias"])
    final = "final_layer_norm" if names == "hf" else "ln_final"
    x = hub.layer_norm(x, p[final + ".weight"], p[final + ".bias"], eps)
    pooled = x[:, -1] if pool_last else x[torch.arange(P), ids.argmax(-1)]
    head = "head" if names == "hf" else "text_projection"
    return hub.linear(pooled, p[head + ".weight"], p[head + ".bias"])


def legrad_siglip(timm_sd, img, text_direction, empty_direction, heads, eps, act, patch=16, layer_index=-2,
                  threshold=0.8):
    """LeGrad's compute_legrad_siglip (WalBouss/LeGrad legrad/wrapper.py, with utils.py's hooked timm block and
    attentional pooler), written again in float64: each block's output (feat_post_mlp, before the trunk's norm)
    through the attention pool, normalised, dotted with the normalised text embedding; the gradient with respect
    to the pool's attention, clamped at 0, the mean over heads; summed over the blocks from layer_index. The
    'a photo of a' map, min-max normalised, zeroes the patches above 0.8; min-max; bilinear by the patch size."""
    p = {k: v.to(torch.float64) for k, v in timm_sd.items()}
    x, gh, gw = hub.patch_tokens(img.to(torch.float64), p["patch_embed.proj.weight"], p["patch_embed.proj.bias"], patch)
    x = x + p["pos_embed"][0]
    depth = 0
    while f"blocks.{depth}.norm1.weight" in p:
        depth += 1
    outputs = []
    for i in range(depth):
        b = f"blocks.{i}."
        q_w, k_w, v_w = p[b + "attn.qkv.weight"].chunk(3)
        q_b, k_b, v_b = p[b + "attn.qkv.bias"].chunk(3)
        a, _ = hub.attention(hub.layer_norm(x, p[b + "norm1.weight"], p[b + "norm1.bias"], eps), q_w, q_b, k_w, k_b,
                             v_w, v_b, p[b + "attn.proj.weight"], p[b + "attn.proj.bias"], heads)
        x = x + a
        h = hub.layer_norm(x, p[b + "norm2.weight"], p[b + "norm2.bias"], eps)
        x = x + hub.linear(act(hub.linear(h, p[b + "mlp.fc1.weight"], p[b + "mlp.fc1.bias"])), p[b + "mlp.fc2.weight"],
                           p[b + "mlp.fc2.bias"])
        outputs.append(x)

    def pool(tokens):  # hooked_attentional_pooler_timm_forward: latent_len 1, pool 'token'
        B, N, C = tokens.shape
        d = C // heads
        q = hub.linear(p["attn_pool.latent"].expand(B, -1, -1), p["attn_pool.q.weight"], p["attn_pool.q.bias"])
        q = q.reshape(B, 1, heads, d).transpose(1, 2)
        k, v = hub.linear(tokens, p["attn_pool.kv.weight"], p["attn_pool.kv.bias"]).reshape(
            B, N, 2, heads, d).permute(2, 0, 3, 1, 4).unbind(0)
        attn = ((q * d ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        out = hub.linear((attn @ v).transpose(1, 2).reshape(B, 1, C), p["attn_pool.proj.weight"], p["attn_pool.proj.bias"])
        h = hub.layer_norm(out, p["attn_pool.norm.weight"], p["attn_pool.norm.bias"], eps)
        out = out + hub.linear(act(hub.linear(h, p["attn_pool.mlp.fc1.weight"], p["attn_pool.mlp.fc1.bias"])),
                               p["attn_pool.mlp.fc2.weight"], p["attn_pool.mlp.fc2.bias"])
        return out[:, 0], attn

    def min_max(t):
        return (t - t.min()) / (t.max() - t.min())

    maps = {"prompt": 0, "empty": 0}
    for x in outputs[depth + layer_index if layer_index < 0 else layer_index:]:
        tokens = x.detach().requires_grad_(True)
        pooled, attn = pool(tokens)
        pooled = pooled / pooled.norm(dim=-1, keepdim=True)
        for key, direction in (("prompt", text_direction), ("empty", empty_direction)):
            grad = torch.autograd.grad((direction @ pooled.t()).sum(), [attn], retain_graph=True)[0].clamp(min=0)
            maps[key] = maps[key] + grad.mean(dim=1)[:, 0].reshape(1, 1, gh, gw)
    accum = maps["prompt"].clone()
    accum[min_max(maps["empty"]) > threshold] = 0
    raw = accum[0, 0].clone()
    upsampled = torch.nn.functional.interpolate(min_max(accum), scale_factor=patch, mode="bilinear")[0, 0]
    return raw, upsampled, int((min_max(maps["empty"]) > threshold).sum())


def scores(image_embedding, text_embeddings, logit_scale, logit_bias):
    image = image_embedding / image_embedding.norm()
    text = text_embeddings / text_embeddings.norm(dim=-1, keepdim=True)
    logits = text @ image * math.exp(logit_scale) + logit_bias
    return logits, torch.sigmoid(logits)


def save(out, name, arrays):
    files = {}
    for key, value in arrays.items():
        files[key] = f"{name}.{key}.npy"
        np.save(os.path.join(out, files[key]), value)
    return files


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    t5_model, gemma_model = train_vocabularies(out)
    cases, wrong = [], {}
    vision_spec = dict(patch=16, cls=False, pos_grid=4, hidden=4 * WIDTH, map=True)
    vision_cfg = {"patch": 16, "heads": HEADS, "eps": 1e-6, "act": "gelu", "timm_class": "VisionTransformer",
                  "global_pool": "map", "pos_grid": (4, 4), "rope": None, "attn_pool_heads": HEADS}
    for index, (name, vocabulary, context, rules, flavour) in enumerate(
            [("hf_siglip", t5_model, 64, "TransformersSiglip", "siglip"),
             ("hf_siglip2", gemma_model, 16, "TransformersGemma", "siglip2"),
             ("open_clip_siglip", gemma_model, 64, "OpenClip", "open_clip")]):
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        vocab = spm.SentencePieceProcessor(model_file=vocabulary).get_piece_size()
        r = Init(4100 + index)
        timm_vision = make_state(4000 + index, vision_spec)
        logit_scale, logit_bias = 2.3 + 0.1 * index, -1.5 - 0.25 * index
        img = smooth_image(4200 + index, 64, 64)
        if name == "open_clip_siglip":
            sd = {"visual.trunk." + k: v for k, v in timm_vision.items()}
            sd.update(text_state(r, vocab, context, WIDTH, WIDTH, "text.", "open_clip"))
            sd["logit_scale"], sd["logit_bias"] = torch.tensor([logit_scale]), torch.tensor([logit_bias])
            safetensors_io.save_file(sd, os.path.join(folder, "open_clip_model.safetensors"))
            json.dump({"model_cfg": {"embed_dim": WIDTH, "init_logit_bias": -10,
                                     "vision_cfg": {"timm_pool": "map", "timm_proj": "none", "image_size": 64},
                                     "text_cfg": {"context_length": context, "vocab_size": vocab, "width": WIDTH,
                                                  "heads": TEXT_HEADS, "layers": TEXT_LAYERS, "no_causal_mask": True,
                                                  "proj_bias": True, "pool_type": "last",
                                                  "norm_kwargs": {"eps": 1e-6},
                                                  "act_kwargs": {"approximate": "tanh"},
                                                  "hf_tokenizer_name": "timm/ViT-B-16-SigLIP2",
                                                  "tokenizer_kwargs": {"clean": "canonicalize"}}},
                       "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}},
                      open(os.path.join(folder, "open_clip_config.json"), "w"), indent=1)
            with open(vocabulary, "rb") as src, open(os.path.join(folder, "tokenizer.model"), "wb") as dst:
                dst.write(src.read())
            names, act = "open_clip", hub.gelu_tanh
            image_embedding = ref.forward(timm_vision, img, vision_cfg)[0][0]
        else:
            sd = hf_siglip_keys(timm_vision, Init(4300 + index))
            sd = {k: v for k, v in sd.items() if not k.startswith("text_model.")}
            sd.update(text_state(r, vocab, context, WIDTH, WIDTH, "text_model.", "hf"))
            sd["logit_scale"], sd["logit_bias"] = torch.tensor([logit_scale]), torch.tensor([logit_bias])
            safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
            json.dump({"model_type": "siglip",
                       "vision_config": {"hidden_size": WIDTH, "num_hidden_layers": 2, "num_attention_heads": HEADS,
                                         "intermediate_size": 4 * WIDTH, "image_size": 64, "patch_size": 16,
                                         "layer_norm_eps": 1e-6, "hidden_act": "gelu_pytorch_tanh"},
                       "text_config": {"hidden_size": WIDTH, "vocab_size": vocab, "num_attention_heads": TEXT_HEADS,
                                       "num_hidden_layers": TEXT_LAYERS, "intermediate_size": TEXT_HIDDEN,
                                       "max_position_embeddings": context, "layer_norm_eps": 1e-6,
                                       "hidden_act": "gelu_pytorch_tanh"}},
                      open(os.path.join(folder, "config.json"), "w"), indent=1)
            vocabulary_file = "spiece.model" if flavour == "siglip" else "tokenizer.model"
            with open(vocabulary, "rb") as src, open(os.path.join(folder, vocabulary_file), "wb") as dst:
                dst.write(src.read())
            names, act = "hf", hub.gelu_tanh
            image_embedding = ref.forward_hf_siglip(sd, img, HEADS, 1e-6)[0][0]
        # The prompts that fit the context with their end token (attnscope refuses the others, where the tools cut).
        lower = True if flavour == "siglip2" else None
        prompts = [p for p in PROMPTS if len(tok.siglip_tokenize(vocabulary, [p], 4 * context, flavour, lower=lower)[0])
                   and tok.siglip_tokenize(vocabulary, [p], 4 * context, flavour, lower=lower)[0][context - 1]
                   in (tok._load(vocabulary).sp.pad_id(), tok._load(vocabulary).sp.eos_id())]
        assert len(prompts) >= 5, (name, prompts)
        rows = tok.siglip_tokenize(vocabulary, prompts, context, flavour, lower=lower)
        ids = torch.tensor(rows, dtype=torch.int64)
        text = text_forward(sd, ids, names, TEXT_HEADS, 1e-6, act)
        logits, probabilities = scores(image_embedding, text, logit_scale, logit_bias)
        # Readings a port could get wrong change the embeddings by far more than the tolerance.
        readings = {"causal mask": text_forward(sd, ids, names, TEXT_HEADS, 1e-6, act, causal=True),
                    "argmax pooling": text_forward(sd, ids, names, TEXT_HEADS, 1e-6, act, pool_last=False),
                    "exact GELU": text_forward(sd, ids, names, TEXT_HEADS, 1e-6, hub.gelu_erf)}
        wrong[name] = {k: float((v - text).abs().max() / text.abs().max()) for k, v in readings.items()}
        for reading, moved in wrong[name].items():
            assert moved > (1e-4 if reading == "exact GELU" else 1e-3), (name, reading, moved)
        if flavour == "siglip2":
            raw = tok.siglip_tokenize(vocabulary, prompts, context, flavour, lower=False)
            assert raw != rows, "lower-casing must change some prompt's ids"
        # LeGrad of the first prompt, with the authors' correction prompt tokenized by the same rules.
        empty_ids = torch.tensor(tok.siglip_tokenize(vocabulary, ["a photo of a"], context, flavour, lower=lower))
        directions = torch.cat([text[:1], text_forward(sd, empty_ids, names, TEXT_HEADS, 1e-6, act)])
        directions = directions / directions.norm(dim=-1, keepdim=True)
        legrad_raw, legrad_upsampled, corrected = legrad_siglip(timm_vision, img, directions[0], directions[1], HEADS,
                                                                1e-6, hub.gelu_tanh if names == "hf" else hub.gelu_erf)
        files = save(out, name, {"image": img.numpy(), "ids": ids.numpy(), "text_embeddings": text.numpy(),
                                 "image_embedding": image_embedding.numpy(), "logits": logits.numpy(),
                                 "probabilities": probabilities.numpy(), "legrad_raw": legrad_raw.detach().numpy(),
                                 "legrad_upsampled": legrad_upsampled.detach().numpy()})
        cases.append({"name": name, "model": name, "rules": rules, "context": context, "heads": HEADS,
                      "vocab_size": vocab, "prompts": prompts, "logit_scale": logit_scale, "logit_bias": logit_bias,
                      "legrad_corrected": corrected, "files": files})
    # The SiglipModel folder without its vocabulary.
    folder = os.path.join(out, "no_vocabulary")
    os.makedirs(folder, exist_ok=True)
    for file in ("model.safetensors", "config.json"):
        with open(os.path.join(out, "hf_siglip", file), "rb") as src, open(os.path.join(folder, file), "wb") as dst:
            dst.write(src.read())
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"cases": cases, "wrong_readings": wrong}, f, indent=1)
    print(f"{len(cases)} SigLIP text cases in {out} ({time.time() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
