"""Independent float64 reference of attnscope's residual-stream analyses (issue 35), written from the
code of ViT-Prisma and TransformerLens, NOT from attnscope's C++ sources.

Reproduced from ViT-Prisma (soniajoseph/ViT-Prisma, src/vit_prisma):
* prisma_tools/loading_from_pretrained.py  convert_timm_weights: W_Q, W_K, W_V [h, C, d] from qkv.weight
  "(three h dh) d -> three h d dh", W_O [h, d, C] from proj.weight "m (i h) -> i h m", b_Q/b_K/b_V [h, d].
* models/base_vit.py  HookedViT.from_pretrained's defaults, load_and_process_state_dict(fold_ln=True,
  center_writing_weights=True, fold_value_biases=True, refactor_factored_attn_matrices=False), i.e. in order
  fold_layer_norm(fold_biases=True, center_weights=True), center_writing_weights, fold_value_biases;
  HookedViT.forward (embed, class token, pos_embed, ln_pre, blocks, ln_final, class-token read-out, head);
  tokens_to_residual_directions (W_H[:, labels]).
* models/layers/transformer_block.py  TransformerBlock.forward: hook_resid_pre, ln1, attn, hook_attn_out,
  resid_mid, ln2, mlp, hook_mlp_out, resid_post.
* models/layers/attention.py  Attention.forward: pattern = softmax(q k^T / sqrt(d_head)), hook_z = pattern @ v,
  out = z W_O + b_O.
* models/layers/layer_norm.py  LayerNormPre (what a folded LayerNorm is): centre, hook_scale =
  sqrt(mean(x^2) + eps), divide.
* prisma_tools/activation_cache.py  apply_ln_to_stack (centre the stack, divide by the cached
  ln_final.hook_scale), decompose_resid, compute_head_results / stack_head_results, logit_attrs.
* prisma_tools/logit_lens.py  get_patch_logit_directions: accumulated_resid(layer=-1) (each block's
  resid_pre and the final resid_post), apply_ln_to_stack(layer=-1), einsum with the answers' W_H rows.
Reproduced from TransformerLens (TransformerLensOrg/TransformerLens, transformer_lens/patching.py):
* generic_activation_patch: one full forward of the corrupted input per index, a hook writing the clean
  activation, the metric of the patched logits; layer_head_vector_patch_setter with activation "z"
  (get_act_patch_attn_head_out_all_pos, [layers, heads]) and layer_pos_patch_setter with "resid_pre"
  (get_act_patch_resid_pre, [layers, pos]).

centre_writing_weights and the centring inside fold_layer_norm (W_H and every W_Q/W_K/W_V centred over
d_model; W_pos, W_O, b_O, W_out, b_out centred) are applied as Prisma applies them by default. They move the
residual stream along the all-ones direction only, and every quantity here reads the stream through a
centring (apply_ln_to_stack centres each component; the lens centres each residual; the blocks' LayerNorms
centre), so DLA values, the lens, ablated outputs and patching metrics are the same with or without them;
they are kept so that the reference is Prisma's computation, not an equivalent one. (W_E and the class token
are not centred: Prisma's center_writing_weights leaves them, its W_E line commented out.) Prisma has no
center_unembed (TransformerLens's HookedTransformer.from_pretrained does, default True: W_U minus its mean over
the vocabulary, which shifts every logit by the same amount); HookedViT.from_pretrained takes no such flag and
never centres W_H over the classes, so a class's DLA values sum to its real logit, not to the logit minus the
mean logit. (A logit difference, as patching uses, would be the same either way.)

Where the issue extends Prisma (Prisma has none of these):
* a distilled DeiT: the read-out is the mean of the class token through head and the distillation token
  through head_dist, each through the same cached final scale of its own token; the lens reads every token
  through the mean of the two folded heads;
* LayerScale (DINOv2): ls1.gamma folded into W_O and b_O, ls2.gamma into W_out and b_out, before centring
  (a LayerScale is linear, so this is exact); register tokens are prefix tokens like the class token;
* CLIP's visual tower: ln_pre is Prisma's ln_pre (not folded: fold_layer_norm leaves it), the head is the
  projection with a zero bias (convert_clip_weights' head.b_H), QuickGELU;
* a model without a head (DINOv2 features): W_H = I before folding; a pooled model (timm global pool) with
  fc_norm: the stack is pooled over the patch tokens, then centred and divided by fc_norm's cached scale of
  the pooled features;
* read-out targets other than a class: t in the output space, the direction W_H t (a class is t = e_C); the
  output norm is the direction of the output itself;
* kernels other than softmax (here FLatten's focused kernel with its DWC on V, through reference_vit.py's
  Attention): z is the kernel on the bias-free values plus the DWC without its bias, and the layer's
  output is the real one, so that its bias share (output minus the heads' results) is exactly what the
  biases contribute; fold_value_biases' premise (rows summing to one) does not hold there.
"""

import math

import torch
import torch.nn.functional as F

import reference_vit

DTYPE = torch.float64


def quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


class FoldedViT:
    """A timm-layout state dict (patch_embed.proj, cls_token, dist_token?, reg_token?, pos_embed, norm_pre?,
    blocks.i.{norm1, attn.qkv, attn.proj, ls1.gamma?, norm2, mlp.fc1, mlp.fc2, ls2.gamma?}, norm?, fc_norm?,
    head?, head_dist?) converted and folded as HookedViT.from_pretrained loads a model.

    pos_prefix: how many prefix tokens pos_embed covers (all of them for timm, 1 for DINOv2's class token).
    settings: a reference_vit.Settings for non-softmax kernels (None: softmax, Prisma's Attention).
    """

    def __init__(self, sd, heads, eps, activation="gelu", pos_prefix=None, settings=None):
        sd = {k: v.to(DTYPE) if v.is_floating_point() else v for k, v in sd.items()}
        self.raw = sd
        self.eps = eps
        self.act = quick_gelu if activation == "quick_gelu" else F.gelu
        self.settings = settings
        self.C = sd["patch_embed.proj.weight"].shape[0]
        self.h = heads
        self.d = self.C // heads
        self.patch = sd["patch_embed.proj.weight"].shape[-1]
        self.prefix = [sd[k] for k in ("cls_token", "dist_token", "reg_token") if k in sd]
        self.P = sum(t.shape[1] for t in self.prefix)
        self.pos_prefix = self.P if pos_prefix is None else pos_prefix
        self.depth = 0
        while f"blocks.{self.depth}.norm1.weight" in sd:
            self.depth += 1
        self.ln_pre = (sd["norm_pre.weight"], sd["norm_pre.bias"]) if "norm_pre.weight" in sd else None
        self.distilled = "head_dist.weight" in sd
        self.pooled = "cls_token" not in sd
        self.final_norm = "norm" if "norm.weight" in sd else "fc_norm"
        if self.non_softmax:
            self.attn_modules = [reference_vit.Attention(sd, f"blocks.{l}.attn.", self.C, heads)
                                 for l in range(self.depth)]
        self.state = self.process(self.convert(sd))

    @property
    def non_softmax(self):
        return self.settings is not None and self.settings.variant != "softmax"

    # ---- convert_timm_weights (and the extensions) ----------------------------------------------
    def convert(self, old):
        h, d, C = self.h, self.d, self.C
        new = {}
        for l in range(self.depth):
            p = f"blocks.{l}."
            new[p + "ln1.w"], new[p + "ln1.b"] = old[p + "norm1.weight"], old[p + "norm1.bias"]
            new[p + "ln2.w"], new[p + "ln2.b"] = old[p + "norm2.weight"], old[p + "norm2.bias"]
            W = old[p + "attn.qkv.weight"].reshape(3, h, d, C).permute(0, 1, 3, 2)  # "(three h dh) d -> three h d dh"
            new[p + "attn.W_Q"], new[p + "attn.W_K"], new[p + "attn.W_V"] = W.unbind(0)
            W_O = old[p + "attn.proj.weight"].reshape(C, h, d).permute(1, 2, 0)  # "m (i h) -> i h m"
            b_O = old[p + "attn.proj.bias"]
            qkv_b = old.get(p + "attn.qkv.bias")
            qkv_b = torch.zeros(3 * C, dtype=DTYPE) if qkv_b is None else qkv_b
            new[p + "attn.b_Q"], new[p + "attn.b_K"], new[p + "attn.b_V"] = qkv_b.reshape(3, h, d).unbind(0)
            W_in, b_in = old[p + "mlp.fc1.weight"].T, old[p + "mlp.fc1.bias"]
            W_out, b_out = old[p + "mlp.fc2.weight"].T, old[p + "mlp.fc2.bias"]
            if p + "ls1.gamma" in old:  # LayerScale folded into the writing weights (extension)
                W_O, b_O = W_O * old[p + "ls1.gamma"], b_O * old[p + "ls1.gamma"]
                W_out, b_out = W_out * old[p + "ls2.gamma"], b_out * old[p + "ls2.gamma"]
            new[p + "attn.W_O"], new[p + "attn.b_O"] = W_O, b_O
            new[p + "mlp.W_in"], new[p + "mlp.b_in"] = W_in, b_in
            new[p + "mlp.W_out"], new[p + "mlp.b_out"] = W_out, b_out
        norm = self.final_norm
        new["ln_final.w"], new["ln_final.b"] = old[norm + ".weight"], old[norm + ".bias"]
        if "head.weight" in old:
            new["head.W_H"] = old["head.weight"].T
            new["head.b_H"] = old.get("head.bias", torch.zeros(old["head.weight"].shape[0], dtype=DTYPE))
        else:  # features: the identity head
            new["head.W_H"], new["head.b_H"] = torch.eye(C, dtype=DTYPE), torch.zeros(C, dtype=DTYPE)
        if self.distilled:
            new["head_dist.W_H"], new["head_dist.b_H"] = old["head_dist.weight"].T, old["head_dist.bias"]
        new["pos_embed.W_pos"] = old["pos_embed"][0]
        return new

    # ---- load_and_process_state_dict ---------------------------------------------------------------
    def process(self, sd):
        sd = self.fold_layer_norm(sd)
        sd = self.center_writing_weights(sd)
        return self.fold_value_biases(sd)

    def fold_layer_norm(self, sd):
        for l in range(self.depth):
            p = f"blocks.{l}."
            for m in ("Q", "K", "V"):
                sd[p + f"attn.b_{m}"] = sd[p + f"attn.b_{m}"] + (sd[p + f"attn.W_{m}"] * sd[p + "ln1.b"][None, :, None]).sum(-2)
            for m in ("Q", "K", "V"):
                sd[p + f"attn.W_{m}"] = sd[p + f"attn.W_{m}"] * sd[p + "ln1.w"][None, :, None]
                sd[p + f"attn.W_{m}"] = sd[p + f"attn.W_{m}"] - sd[p + f"attn.W_{m}"].mean(1, keepdim=True)
            del sd[p + "ln1.b"], sd[p + "ln1.w"]
            sd[p + "mlp.b_in"] = sd[p + "mlp.b_in"] + (sd[p + "mlp.W_in"] * sd[p + "ln2.b"][:, None]).sum(-2)
            sd[p + "mlp.W_in"] = sd[p + "mlp.W_in"] * sd[p + "ln2.w"][:, None]
            sd[p + "mlp.W_in"] = sd[p + "mlp.W_in"] - sd[p + "mlp.W_in"].mean(0, keepdim=True)
            del sd[p + "ln2.b"], sd[p + "ln2.w"]
        for head in ("head", "head_dist") if self.distilled else ("head",):
            sd[head + ".b_H"] = sd[head + ".b_H"] + (sd[head + ".W_H"] * sd["ln_final.b"][:, None]).sum(-2)
            sd[head + ".W_H"] = sd[head + ".W_H"] * sd["ln_final.w"][:, None]
            sd[head + ".W_H"] = sd[head + ".W_H"] - sd[head + ".W_H"].mean(0, keepdim=True)
        del sd["ln_final.b"], sd["ln_final.w"]
        return sd

    def center_writing_weights(self, sd):
        sd["pos_embed.W_pos"] = sd["pos_embed.W_pos"] - sd["pos_embed.W_pos"].mean(-1, keepdim=True)
        for l in range(self.depth):
            p = f"blocks.{l}."
            sd[p + "attn.W_O"] = sd[p + "attn.W_O"] - sd[p + "attn.W_O"].mean(-1, keepdim=True)
            sd[p + "attn.b_O"] = sd[p + "attn.b_O"] - sd[p + "attn.b_O"].mean()
            sd[p + "mlp.W_out"] = sd[p + "mlp.W_out"] - sd[p + "mlp.W_out"].mean(-1, keepdim=True)
            sd[p + "mlp.b_out"] = sd[p + "mlp.b_out"] - sd[p + "mlp.b_out"].mean()
        return sd

    def fold_value_biases(self, sd):
        for l in range(self.depth):
            p = f"blocks.{l}."
            b_V, W_O = sd[p + "attn.b_V"], sd[p + "attn.W_O"]
            sd[p + "attn.b_O"] = sd[p + "attn.b_O"] + (b_V[:, :, None] * W_O).sum([0, 1])
            sd[p + "attn.b_V"] = torch.zeros_like(b_V)
        return sd

    # ---- the forward with hooks ---------------------------------------------------------------------
    def ln_pre_forward(self, x):
        w, b = self.ln_pre
        return F.layer_norm(x, (self.C,), w, b, self.eps)

    def layer_norm_pre(self, x):
        """LayerNormPre: (centred x) / hook_scale, hook_scale [.., 1]."""
        x = x - x.mean(-1, keepdim=True)
        scale = (x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()
        return x / scale, scale

    def embed(self, img):
        B = img.shape[0]
        x = F.conv2d(img.to(DTYPE), self.raw["patch_embed.proj.weight"], self.raw.get("patch_embed.proj.bias"),
                     stride=self.patch).flatten(2).transpose(1, 2)
        pos = self.state["pos_embed.W_pos"]
        tokens = [t.expand(B, -1, -1) for t in self.prefix] + [x]
        x = torch.cat(tokens, dim=1)
        positions = torch.cat([pos[:self.pos_prefix], torch.zeros(self.P - self.pos_prefix, self.C, dtype=DTYPE),
                               pos[self.pos_prefix:]])
        x = x + positions
        if self.ln_pre is not None:
            x = self.ln_pre_forward(x)
        return x

    def grid(self, img):
        return img.shape[2] // self.patch, img.shape[3] // self.patch

    def attention(self, l, x_hat, img, hooks, cache):
        """x_hat [B, T, C] (LayerNormPre of resid_pre) -> attn_out [B, T, C]; z hook and cache."""
        p = f"blocks.{l}.attn."
        s = self.state
        q = torch.einsum("btc,hcd->bthd", x_hat, s[p + "W_Q"]) + s[p + "b_Q"]
        k = torch.einsum("btc,hcd->bthd", x_hat, s[p + "W_K"]) + s[p + "b_K"]
        v = torch.einsum("btc,hcd->bthd", x_hat, s[p + "W_V"]) + s[p + "b_V"]  # b_V = 0: bias-free values
        if not self.non_softmax:
            scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d)
            pattern = scores.softmax(-1)
            z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
            z = hooks.get(("z", l), lambda t: t)(z)
            out = torch.einsum("bqhd,hdc->bqc", z, s[p + "W_O"]) + s[p + "b_O"]
        else:
            # The real layer (reference_vit's kernels on the raw values with their bias), and z from the same
            # kernel on the bias-free values with the DWC's bias left out.
            module = self.attn_modules[l]
            ctx = reference_vit._Ctx()
            gh, gw = self.grid(img)
            ctx.settings, ctx.gh, ctx.gw, ctx.num_prefix, ctx.mask, ctx.with_dwc_band = self.settings, gh, gw, self.P, None, False
            to_heads = lambda t: t.permute(0, 2, 1, 3)  # [B, T, h, d] -> [B, h, T, d]
            value_bias = self.value_bias(l)  # [h, d]
            kernel = {"focused": module._focused, "linear": module._linear, "enhanced": module._enhanced}[self.settings.variant]
            full, pattern = kernel(to_heads(q), to_heads(k), to_heads(v + value_bias), ctx, True)
            saved = module.dwc_b
            module.dwc_b = None if saved is None else torch.zeros_like(saved)
            free, _ = kernel(to_heads(q), to_heads(k), to_heads(v), ctx, False)
            module.dwc_b = saved
            z = to_heads(free)  # [B, T, h, d]
            z_used = hooks.get(("z", l), lambda t: t)(z)
            raw = self.raw
            real = F.linear(full.transpose(1, 2).reshape(full.shape[0], -1, self.C),
                            raw[f"blocks.{l}.attn.proj.weight"], raw[f"blocks.{l}.attn.proj.bias"])
            if f"blocks.{l}.ls1.gamma" in raw:
                real = real * raw[f"blocks.{l}.ls1.gamma"]
            heads_out = torch.einsum("bqhd,hdc->bqc", z, s[p + "W_O"])
            bias_share = real - heads_out  # what the biases contribute, token by token
            out = bias_share + torch.einsum("bqhd,hdc->bqc", z_used, s[p + "W_O"])
            z = z_used
        cache[("pattern", l)] = pattern
        cache[("z", l)] = z
        return out

    def value_bias(self, l):
        """[h, d]: qkv's V bias plus norm1's bias through W_V (Prisma's b_V after fold_layer_norm, before
        fold_value_biases), from the raw weights."""
        raw, p = self.raw, f"blocks.{l}."
        W_V = raw[p + "attn.qkv.weight"][2 * self.C:]
        b = W_V @ raw[p + "norm1.bias"]
        if p + "attn.qkv.bias" in raw:
            b = b + raw[p + "attn.qkv.bias"][2 * self.C:]
        return b.reshape(self.h, self.d)

    def run(self, img, hooks=None):
        """img [B, 3, H, W] -> (output [B, K], cache). hooks: {("z", l) | ("resid_pre", l): fn(t) -> t}."""
        hooks = hooks or {}
        cache = {}
        s = self.state
        x = self.embed(img)
        for l in range(self.depth):
            x = hooks.get(("resid_pre", l), lambda t: t)(x)
            cache[("resid_pre", l)] = x
            x_hat, _ = self.layer_norm_pre(x)
            attn_out = self.attention(l, x_hat, img, hooks, cache)
            cache[("attn_out", l)] = attn_out
            x = x + attn_out
            x_hat2, _ = self.layer_norm_pre(x)
            p = f"blocks.{l}.mlp."
            mlp_out = self.act(x_hat2 @ s[p + "W_in"] + s[p + "b_in"]) @ s[p + "W_out"] + s[p + "b_out"]
            cache[("mlp_out", l)] = mlp_out
            x = x + mlp_out
        cache["resid_final"] = x
        return self.read_out(x, cache), cache

    def read_out(self, x, cache):
        s = self.state
        if self.final_norm == "norm":
            x_hat, scale = self.layer_norm_pre(x)
            cache["scale"] = scale  # ln_final.hook_scale [B, T, 1]
            if self.distilled:
                return ((x_hat[:, 0] @ s["head.W_H"] + s["head.b_H"]) + (x_hat[:, 1] @ s["head_dist.W_H"] + s["head_dist.b_H"])) / 2
            feat = x_hat[:, self.P:].mean(1) if self.pooled else x_hat[:, 0]
            return feat @ s["head.W_H"] + s["head.b_H"]
        pooled = x[:, self.P:].mean(1) if self.pooled else x[:, 0]
        p_hat, scale = self.layer_norm_pre(pooled)
        cache["scale"] = scale  # fc_norm's hook_scale [B, 1]
        return p_hat @ s["head.W_H"] + s["head.b_H"]

    # ---- ActivationCache: decompose_resid, stack_head_results, apply_ln_to_stack, logit_attrs ----------
    def slots(self):
        """The read-out slots: (folded head, token indices, share). Distilled: two, each half."""
        if self.distilled:
            return [("head", [0], 0.5), ("head_dist", [1], 0.5)]
        return [("head", [0] if not self.pooled else None, 1.0)]

    def apply_ln_to_stack(self, stack, cache, tokens):
        """stack [N, T, C] at the model's tokens -> [N, C]: each component at the read tokens, centred and
        divided by the cached final scale, pooled over the tokens (the read-out's mean)."""
        stack = stack - stack.mean(-1, keepdim=True)
        if self.final_norm == "norm":
            scale = cache["scale"][0]  # [T, 1]
            idx = tokens if tokens is not None else list(range(self.P, stack.shape[1]))
            return (stack[:, idx] / scale[idx]).mean(1)
        idx = tokens if tokens is not None else list(range(self.P, stack.shape[1]))
        return stack[:, idx].mean(1) / cache["scale"][0]

    def logit_attrs(self, stack, cache, target):
        """[N, T, C] -> [N]: apply_ln_to_stack then the dot product with the folded direction W_H t, summed
        over the read-out's slots."""
        total = torch.zeros(stack.shape[0], dtype=DTYPE)
        for head, tokens, share in self.slots():
            direction = self.state[head + ".W_H"] @ target
            total = total + share * (self.apply_ln_to_stack(stack, cache, tokens) @ direction)
        return total

    def read_weights(self, tokens, T, cache):
        """[T]: what the read-out of one slot multiplies each token's (centred) component by before the dot
        product: the pooling share over the token's cached final scale."""
        idx = tokens if tokens is not None else list(range(self.P, T))
        w = torch.zeros(T, dtype=DTYPE)
        if self.final_norm == "norm":
            w[idx] = 1.0 / len(idx) / cache["scale"][0][idx, 0]
        else:
            w[idx] = 1.0 / len(idx) / cache["scale"][0, 0]
        return w

    def attr_scales(self, stack, cache, target):
        """[N]: how large each attribution's terms are: over the read-out's slots and tokens, the weight of the
        token times max_c |component| times |direction|_1 (what a float32 error in the component, relative to
        its largest entry, is multiplied by)."""
        total = torch.zeros(stack.shape[0], dtype=DTYPE)
        for head, tokens, share in self.slots():
            direction = self.state[head + ".W_H"] @ target
            w = self.read_weights(tokens, stack.shape[1], cache)
            total = total + share * (stack.abs().amax(-1) @ w) * direction.abs().sum()
        return total

    def head_scales(self, cache, l, target):
        """[h]: the same for each head's value, whose float32 input is z: over the slots and tokens, the token's
        weight times max_d |z_h| times |W_O_h direction|_1."""
        z = cache[("z", l)][0]  # [T, h, d]
        total = torch.zeros(self.h, dtype=DTYPE)
        for head, tokens, share in self.slots():
            direction = self.state[head + ".W_H"] @ target
            w = self.read_weights(tokens, z.shape[0], cache)
            back = (self.state[f"blocks.{l}.attn.W_O"] @ direction).abs().sum(-1)  # [h]
            total = total + share * (z.abs().amax(-1).T @ w) * back
        return total

    def head_bias(self, target):
        return sum(share * float(self.state[head + ".b_H"] @ target) for head, _, share in self.slots())

    def head_results(self, cache, l):
        """compute_head_results: z * W_O summed over d_head -> [B, T, h, C]."""
        z = cache[("z", l)]
        return (z[..., None] * self.state[f"blocks.{l}.attn.W_O"]).sum(-2)

    def direct_logit_attribution(self, cache, target):
        labels = ["embed"]
        stack = [cache[("resid_pre", 0)][0]]
        for l in range(self.depth):
            labels += [f"{l}_attn_out", f"{l}_mlp_out"]
            stack += [cache[("attn_out", l)][0], cache[("mlp_out", l)][0]]
        stack = torch.stack(stack)
        values = self.logit_attrs(stack, cache, target)
        scales = self.attr_scales(stack, cache, target)
        heads = torch.stack([self.logit_attrs(self.head_results(cache, l)[0].permute(1, 0, 2), cache, target)
                             for l in range(self.depth)])
        head_scales = torch.stack([self.head_scales(cache, l, target) for l in range(self.depth)])
        attn_values = values[1::2]
        return {
            "labels": labels + ["head_bias"],
            "values": values.tolist() + [self.head_bias(target)],
            "scales": scales.tolist() + [0.0],
            "heads": heads, "head_scales": head_scales,
            "attn_bias": attn_values - heads.sum(1),
        }

    # ---- get_patch_logit_directions ------------------------------------------------------------------
    def lens_matrix(self):
        """[C, K]: the folded head the lens reads through (distilled: the mean of the two)."""
        W = self.state["head.W_H"]
        return (W + self.state["head_dist.W_H"]) / 2 if self.distilled else W

    def lens_scale(self, cache):
        """[T, 1]: each token's final scale: the cached ln_final.hook_scale, or with fc_norm alone the scale
        fc_norm would give the final residual's token."""
        if self.final_norm == "norm":
            return cache["scale"][0]
        return self.layer_norm_pre(cache["resid_final"][0])[1]

    def logit_lens(self, cache):
        acc = torch.stack([cache[("resid_pre", l)][0] for l in range(self.depth)] + [cache["resid_final"][0]])
        acc = acc - acc.mean(-1, keepdim=True)
        scale = self.lens_scale(cache)
        scaled = acc / scale
        W = self.lens_matrix()
        lens = torch.einsum("ltc,ck->ltk", scaled, W)
        magnitude = torch.einsum("lt,k->ltk", scaled.abs().amax(-1), W.abs().sum(0))
        return lens, magnitude


# ---- TransformerLens patching -----------------------------------------------------------------------
def read(target, output_row):
    """The read-out of one output row: ("class", C), ("direction", t) or ("norm",)."""
    if target[0] == "class":
        return float(output_row[target[1]])
    if target[0] == "direction":
        return float(output_row @ target[1])
    return float(output_row.norm())


def logit_difference(target, baseline, output_row):
    return read(target, output_row) - (read(baseline, output_row) if baseline is not None else 0.0)


def activation_patching(model, clean_img, corrupt_img, target, baseline):
    """get_act_patch_attn_head_out_all_pos and get_act_patch_resid_pre with the metric
    (ld_patched - ld_corrupt) / (ld_clean - ld_corrupt)."""
    clean_out, clean_cache = model.run(clean_img)
    corrupt_out, _ = model.run(corrupt_img)
    ld_clean = logit_difference(target, baseline, clean_out[0])
    ld_corrupt = logit_difference(target, baseline, corrupt_out[0])
    metric = lambda out: (logit_difference(target, baseline, out[0]) - ld_corrupt) / (ld_clean - ld_corrupt)
    T = clean_cache[("resid_pre", 0)].shape[1]
    heads = torch.zeros(model.depth, model.h, dtype=DTYPE)
    resid = torch.zeros(model.depth, T, dtype=DTYPE)
    for l in range(model.depth):
        for h in range(model.h):
            def setter(z, l=l, h=h):  # layer_head_vector_patch_setter
                z = z.clone()
                z[:, :, h] = clean_cache[("z", l)][:, :, h]
                return z
            heads[l, h] = metric(model.run(corrupt_img, {("z", l): setter})[0])
        for pos in range(T):
            def setter(x, l=l, pos=pos):  # layer_pos_patch_setter
                x = x.clone()
                x[:, pos] = clean_cache[("resid_pre", l)][:, pos]
                return x
            resid[l, pos] = metric(model.run(corrupt_img, {("resid_pre", l): setter})[0])
    return {"heads": heads, "resid": resid, "ld_clean": ld_clean, "ld_corrupt": ld_corrupt}


def ablation_hooks(heads, replacements):
    """hook_z replaced for each (layer, head): replacements[i] is None (zero) or a [T, d] mean."""
    by_layer = {}
    for (l, h), value in zip(heads, replacements):
        by_layer.setdefault(l, []).append((h, value))

    def make(items):
        def hook(z):
            z = z.clone()
            for h, value in items:
                z[:, :, h] = 0.0 if value is None else value
            return z
        return hook

    return {("z", l): make(items) for l, items in by_layer.items()}


def mean_head_outputs(model, images, heads):
    """Each listed head's z averaged over the images, per token position: [n, T, d]."""
    total = None
    for img in images:
        _, cache = model.run(img[None])
        zs = torch.stack([cache[("z", l)][0, :, h] for l, h in heads])
        total = zs if total is None else total + zs
    return total / len(images)
