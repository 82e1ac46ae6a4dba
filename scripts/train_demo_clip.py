#!/usr/bin/env python3
"""Trains the bundled demo CLIP (assets/models/clip.safetensors): a small CLIP in OpenAI's layout
(the keys of openai/CLIP's clip/model.py state_dict: a ViT visual tower and a causal text transformer,
QuickGELU, heads = width / 64), trained contrastively on the generated "sign in clutter" task
(datasets/glyph_task.h) with generated captions that name the digit, the colours and letters around it
and their places, tokenized by CLIP's real BPE tokenizer (tests/python/reference_clip_tokenizer.py
with OpenAI's vocabulary in assets/clip/).

Captions are generated from what the generator drew (`attnscope glyphs --format npy` writes the
images, labels.csv and letters.csv). Because every caption is a set of checkable facts, the
contrastive targets are exact: a caption is a positive for every image in the batch it is true of
(the caption "the digit 4" matches every 4 in the batch), each direction's target spread evenly over
its positives. Everything else is CLIP's recipe: symmetric cross-entropy over logit_scale.exp() times
the cosines, logit_scale learned (clamped at 100), AdamW.

The text tower is trained on rows cut after the batch's longest caption: with the causal mask the
end-of-text row never sees the padding, so its embedding equals the one at context 77 (the saved
tower has all 77 positions, as clip.tokenize's rows need).

Usage (scripts/train_demo_models.sh runs it):
  attnscope glyphs --format npy --count 60000 --seed 0 --out /tmp/clip_train
  attnscope glyphs --format npy --count 1000 --seed 1000000000000 --out /tmp/clip_held_out
  scripts/train_demo_clip.py --train /tmp/clip_train --held-out /tmp/clip_held_out \
      --out assets/models/clip.safetensors
"""
import argparse
import csv
import json
import math
import os
import sys
import time
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import debian_torch  # noqa: F401,E402  (re-runs under /usr/bin/python3 when torch is elsewhere)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from reference_clip_tokenizer import Tokenizer  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
LETTERS = "ACEFHJKLMNPRTUVWXY"  # datasets/glyph_task.cpp kDistractorLetters
COLOURS = ["red", "orange", "yellow", "brown", "green", "cyan", "blue", "purple", "pink", "white", "grey", "black"]
PLACES = ["at the top left", "at the top", "at the top right", "on the left", "in the middle", "on the right",
          "at the bottom left", "at the bottom", "at the bottom right"]


# ---- what the captions say

def colour_name(r, g, b):
    """A plain colour word for an RGB ink (0..255): achromatic ones by value, the rest by hue."""
    high, low = max(r, g, b), min(r, g, b)
    value, saturation = high / 255.0, (high - low) / max(high, 1)
    if value < 0.22:
        return "black"
    if saturation < 0.22:
        return "white" if value > 0.78 else "grey"
    span = high - low
    if high == r:
        hue = (60.0 * (g - b) / span) % 360
    elif high == g:
        hue = 60.0 * (b - r) / span + 120
    else:
        hue = 60.0 * (r - g) / span + 240
    if hue < 15 or hue >= 340:
        return "red"
    if hue < 45:
        return "brown" if value < 0.6 else "orange"
    if hue < 70:
        return "brown" if value < 0.5 else "yellow"
    if hue < 165:
        return "green"
    if hue < 200:
        return "cyan"
    if hue < 255:
        return "blue"
    if hue < 305:
        return "purple"
    return "pink"


def place_index(x, y, w, h, size):
    """Which third of the image, across and down, the box's centre lies in (0..8, row-major)."""
    column = min(2, int(3 * (x + w / 2.0) / size))
    row = min(2, int(3 * (y + h / 2.0) / size))
    return 3 * row + column


class Scene:
    """The facts of one generated image: its digit and place, and its letters (letter, colour, place)."""

    def __init__(self, seed, digit, digit_place, letters):
        self.seed = seed
        self.digit = digit
        self.digit_place = digit_place
        self.letters = letters  # [(letter, colour, place)]


def read_scenes(folder, size):
    scenes = OrderedDict()
    with open(os.path.join(folder, "labels.csv")) as f:
        for row in csv.DictReader(f):
            place = place_index(int(row["x"]), int(row["y"]), int(row["w"]), int(row["h"]), size)
            scenes[int(row["seed"])] = Scene(int(row["seed"]), int(row["label"]), place, [])
    with open(os.path.join(folder, "letters.csv")) as f:
        for row in csv.DictReader(f):
            colour = colour_name(int(row["r"]), int(row["g"]), int(row["b"]))
            place = place_index(int(row["x"]), int(row["y"]), int(row["w"]), int(row["h"]), size)
            scenes[int(row["seed"])].letters.append((row["letter"], colour, place))
    return list(scenes.values())


# A caption is a tuple of clauses: ("digit", d, place or None) and ("letter", L, colour or None,
# place or None); it is true of a scene when every clause is.
def clause_true(clause, scene):
    if clause[0] == "digit":
        return clause[1] == scene.digit and (clause[2] is None or clause[2] == scene.digit_place)
    _, letter, colour, place = clause
    return any(letter == l and (colour is None or colour == c) and (place is None or place == p)
               for l, c, p in scene.letters)


def caption_true(caption, scene):
    return all(clause_true(clause, scene) for clause in caption)


def clause_text(clause):
    if clause[0] == "digit":
        text = "the digit %d" % clause[1]
        place = clause[2]
    else:
        _, letter, colour, place = clause
        text = ("a %s %s" % (colour, letter)) if colour else ("the letter %s" % letter)
    return text if place is None else text + " " + PLACES[place]


def caption_text(caption):
    return ", ".join(clause_text(clause) for clause in caption)


def random_caption(scene, rng, digit_only=0.0):
    """Mostly the digit (what the demo is about), often with letters; places and colours at times.
    `digit_only`: the share of captions that are "the digit N" alone, on top of those the mix gives
    (its batch positives are every N in the batch: the clearest signal for reading the digit)."""
    if digit_only > 0 and rng.random() < digit_only:
        return (("digit", scene.digit, None),)
    clauses = []
    if rng.random() < 0.75 or not scene.letters:
        clauses.append(("digit", scene.digit, scene.digit_place if rng.random() < 0.4 else None))
    if scene.letters:
        wanted = int(rng.integers(0 if clauses else 1, 3))
        for index in rng.permutation(len(scene.letters))[:wanted]:
            letter, colour, place = scene.letters[index]
            clauses.append(("letter", letter, colour if rng.random() < 0.75 else None,
                            place if rng.random() < 0.4 else None))
    if len(clauses) > 1 and rng.random() < 0.3:
        clauses = [clauses[i] for i in rng.permutation(len(clauses))]
    return tuple(clauses)


# What the file says of itself: the workbench's prompt list is the template over the class names.
FILE_METADATA = {"format": "pt", "attnscope_demo": "clip", "task": "sign in clutter (datasets/glyph_task.h)",
                 "class_names": json.dumps([str(d) for d in range(10)]), "prompt_template": "the digit {}"}


# ---- the model: openai/CLIP clip/model.py (ViT visual tower), names as its state_dict has them

class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(width, width * 4)), ("gelu", QuickGELU()),
                                              ("c_proj", nn.Linear(width * 4, width))]))
        self.ln_2 = nn.LayerNorm(width)

    def forward(self, x, mask=None):  # x [L, N, W], as model.py runs it
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=mask)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def forward(self, x, mask=None):
        for block in self.resblocks:
            x = block(x, mask)
        return x


class VisionTransformer(nn.Module):
    def __init__(self, resolution, patch, width, layers, output_dim):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch, stride=patch, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((resolution // patch) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, width // 64)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x):
        x = self.conv1(x).flatten(2).permute(0, 2, 1)
        x = torch.cat([self.class_embedding.expand(x.shape[0], 1, -1), x], dim=1) + self.positional_embedding
        x = self.ln_pre(x).permute(1, 0, 2)
        x = self.transformer(x).permute(1, 0, 2)
        return self.ln_post(x[:, 0, :]) @ self.proj


class CLIP(nn.Module):
    def __init__(self, embed_dim, resolution, patch, vision_width, vision_layers, context_length, vocab_size,
                 text_width, text_layers):
        super().__init__()
        self.context_length = context_length
        self.visual = VisionTransformer(resolution, patch, vision_width, vision_layers, embed_dim)
        self.transformer = Transformer(text_width, text_layers, text_width // 64)
        self.token_embedding = nn.Embedding(vocab_size, text_width)
        self.positional_embedding = nn.Parameter(torch.empty(context_length, text_width))
        self.ln_final = nn.LayerNorm(text_width)
        self.text_projection = nn.Parameter(torch.empty(text_width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
        self.initialize_parameters(text_width, text_layers)

    def initialize_parameters(self, width, layers):
        """CLIP.initialize_parameters, for both towers' blocks."""
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        for tower in (self.transformer, self.visual.transformer):
            tower_width = tower.resblocks[0].ln_1.weight.numel()
            proj_std = (tower_width ** -0.5) * ((2 * len(tower.resblocks)) ** -0.5)
            for block in tower.resblocks:
                nn.init.normal_(block.attn.in_proj_weight, std=tower_width ** -0.5)
                nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
                nn.init.normal_(block.mlp.c_fc.weight, std=(2 * tower_width) ** -0.5)
                nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=width ** -0.5)

    def encode_image(self, images):
        return self.visual(images)

    def encode_text(self, ids):
        length = ids.shape[1]
        mask = torch.full((length, length), float("-inf")).triu_(1)
        x = self.token_embedding(ids) + self.positional_embedding[:length]
        x = self.transformer(x.permute(1, 0, 2), mask).permute(1, 0, 2)
        x = self.ln_final(x)
        return x[torch.arange(x.shape[0]), ids.argmax(dim=-1)] @ self.text_projection


# ---- data

def load_images(folder):
    return np.load(os.path.join(folder, "images.npy"), mmap_mode="r")


def prepare(images_uint8):
    """[B, H, W, 3] uint8 -> [B, 3, H, W] with CLIP's mean and std (the images are at the input size,
    so CLIP's resize and centre crop leave them as they are)."""
    x = torch.from_numpy(np.array(images_uint8)).permute(0, 3, 1, 2).float() / 255.0
    mean = torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    return (x - mean) / std


class TokenCache:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.rows = {}

    def ids(self, texts, length=None):
        """clip.tokenize's rows, cut to `length` (default: the longest row's end-of-text + 1)."""
        rows = []
        for text in texts:
            if text not in self.rows:
                self.rows[text] = self.tokenizer.tokenize([text])[0]
            rows.append(self.rows[text])
        ids = torch.tensor(rows, dtype=torch.int64)
        if length is None:
            length = int(ids.argmax(dim=-1).max()) + 1
        return ids[:, :length]


# ---- zero-shot evaluation on held-out scenes

def zero_shot_tasks(scenes):
    """Each task: (name, per scene: (prompts, index or set of indices counted correct) or None)."""
    digit_prompts = ["the digit %d" % d for d in range(10)]
    letter_prompts = ["the letter %s" % l for l in LETTERS]
    tasks = {"digit": [], "letter": [], "colour": [], "digit place": []}
    for scene in scenes:
        tasks["digit"].append((digit_prompts, {scene.digit}))
        present = {LETTERS.index(l) for l, _, _ in scene.letters}
        tasks["letter"].append((letter_prompts, present) if present else None)
        unique = [(l, c) for l, c, _ in scene.letters if sum(1 for o, _, _ in scene.letters if o == l) == 1]
        if unique:
            letter, colour = unique[0]
            tasks["colour"].append((["a %s %s" % (c, letter) for c in COLOURS], {COLOURS.index(colour)}))
        else:
            tasks["colour"].append(None)
        tasks["digit place"].append((["the digit %d %s" % (scene.digit, p) for p in PLACES], {scene.digit_place}))
    return tasks


@torch.no_grad()
def evaluate(model, images, scenes, tokens, batch=250, device="cpu"):
    model.eval()
    image_embeddings = torch.cat([model.encode_image(prepare(images[i:i + batch]).to(device))
                                  for i in range(0, len(scenes), batch)])
    image_embeddings = image_embeddings / image_embeddings.norm(dim=-1, keepdim=True)
    text_cache = {}
    results = {}
    for name, items in zero_shot_tasks(scenes).items():
        correct = counted = 0
        chance = 0.0
        answers = {}  # how often each prompt is right: the commonest answer's accuracy
        for index, item in enumerate(items):
            if item is None:
                continue
            prompts, right = item
            chance += len(right) / len(prompts)
            for r in right:
                answers[r] = answers.get(r, 0) + 1
            key = tuple(prompts)
            if key not in text_cache:
                text = model.encode_text(tokens.ids(prompts).to(device))
                text_cache[key] = text / text.norm(dim=-1, keepdim=True)
            top = int((image_embeddings[index] @ text_cache[key].T).argmax())
            correct += top in right
            counted += 1
        results[name] = {"accuracy": correct / max(counted, 1), "images": counted,
                         "prompts": len(items[0][0]) if items and items[0] else 0,
                         "uniform_guess": chance / max(counted, 1),
                         "commonest_answer": max(answers.values()) / max(counted, 1) if answers else 0.0}
    model.train()
    return results


TASK_TEXT = {
    "digit": 'prompts "the digit 0" .. "the digit 9"',
    "letter": 'prompts "the letter A" .. for the 18 distractor letters; right when the top prompt names a letter '
              'in the image',
    "colour": 'prompts "a red R", "a purple R", ... over the 12 colour words, for the first letter that appears '
              'once in the image',
    "digit place": 'prompts "the digit 4 at the top left" .. over the 9 places, the digit given',
}


def write_card(path, summary):
    a = summary["architecture"]
    grid = a["image"] // a["patch"]
    lines = [
        "# Demo model: clip",
        "",
        "- Model: a small CLIP in OpenAI's layout (the keys of openai/CLIP's clip/model.py state_dict), float16 on "
        "disk as OpenAI releases CLIP (attnscope computes in float32); %d parameters" % summary["parameters"],
        "- Architecture: visual ViT, input %dx%d, patch %d (%dx%d patches + class token = %d tokens), width %d, "
        "%d layers, %d heads; text transformer, context 77, width %d, %d layers, %d head(s), causal; QuickGELU; "
        "joint embedding %d" % (a["image"], a["image"], a["patch"], grid, grid, grid * grid + 1, a["vision_width"],
                                 a["vision_layers"], a["vision_width"] // 64, a["text_width"], a["text_layers"],
                                 a["text_width"] // 64, a["embed_dim"]),
        "- Tokenizer: CLIP's byte-level BPE with OpenAI's vocabulary (assets/clip/bpe_simple_vocab_16e6.txt.gz, "
        "49408 ids)",
        "- Task: sign in clutter (datasets/glyph_task.h) with generated captions of what the generator drew: the "
        "digit (\"the digit 4\"), letters with their ink's colour word (\"a purple r\", or \"the letter r\") and "
        "places in thirds of the image (\"at the top left\", \"in the middle\"), one to three clauses, e.g. "
        "\"the digit 4 at the top left, a purple r at the bottom\"; colour words from the ink's hue, saturation "
        "and value (scripts/train_demo_clip.py colour_name)" + (
            "; a share of %g of the captions is the digit alone (\"the digit 4\"), drawn before that mix"
            % summary["digit_only"] if summary.get("digit_only") else ""),
    ]
    for task, result in summary["zero_shot"].items():
        lines.append("- Zero-shot, %s: %.3f on %d held-out images (%s; a uniform guess scores %.3f, always the "
                     "commonest right answer %.3f)" % (task, result["accuracy"], result["images"], TASK_TEXT[task],
                                                       result["uniform_guess"], result["commonest_answer"]))
    learned = [task for task, r in summary["zero_shot"].items()
               if r["accuracy"] > max(r["uniform_guess"], r["commonest_answer"]) + 0.05]
    if not learned:
        lines.append("- Limits: after this short run (%d pairs on one thread of a shared CPU) it has learned little: "
                     "every accuracy above is within 0.05 of a uniform guess or of always giving the commonest "
                     "answer, and the ten digit prompts get nearly one text embedding (the signs' digit "
                     "probabilities are all about 0.1). It ships as a CLIP-shaped file whose text tower, tokenizer "
                     "and preprocessing the C++ path is checked against, not as a model that reads the signs; the "
                     "classifier demos needed 45,000-96,000 images to read the digit, and this contrastive recipe "
                     "needs a longer run" % (summary["steps"] * summary["batch"]))
    unlearned = [task for task in summary["zero_shot"] if task not in learned]
    if learned and unlearned:
        lines.append("- Limits: this run learned %s but not %s: each of those accuracies is within 0.05 of a uniform "
                     "guess or of always giving the commonest answer, so prompts about letters, colours and places "
                     "score like a guess and their text-prompted maps do not point at what they name; the "
                     "digit's do (tests/test_bundled_clip.cpp, TextPromptedMapsPointAtTheSign)"
                     % (", ".join(learned), ", ".join(unlearned)))
    if summary.get("bundled_signs"):
        lines.append("- Bundled signs, top digit prompt (its probability over the ten): " + ", ".join(
            '%s: "the digit %d" (%.3f)' % (name, digit, probability)
            for name, digit, probability in summary["bundled_signs"]))
    lines += [
        "- Preprocessing: CLIP's own (bicubic resize of the short side, centre crop of the input size: the 96x96 "
        "images as they are; OpenAI CLIP's mean and std), attnscope's default for CLIP files. "
        "tests/test_bundled_clip.cpp measures the accuracies above again through the C++ path and checks them "
        "against this card",
        "- In the workbench: the file's metadata names the classes 0-9 and the prompt template \"the digit {}\", so "
        "the CLIP views' prompt list is \"the digit 0\" .. \"the digit 9\" unless a prompt file is given",
        "- Held-out images: seeds from 10^12 (`attnscope glyphs --format npy --count %d --seed 1000000000000`), "
        "never seen in training; the bundled sign_*.png are among them" % summary["held_out_images"],
        "- Training: %d steps x %d image-caption pairs from %d generated images, contrastive (CLIP's symmetric "
        "cross-entropy, each caption a positive for every image in the batch it is true of), AdamW lr %g "
        "(%d steps warm-up, then constant), wd %.2f, final training loss %.3f, logit scale %.1f, %dm%02ds on %d CPU "
        "thread(s) of a shared machine" % (summary["steps"], summary["batch"], summary["train_images"], summary["lr"],
                                           summary["warmup"], summary["weight_decay"], summary["final_loss"],
                                           summary["logit_scale"], summary["seconds"] // 60, summary["seconds"] % 60,
                                           summary["threads"]),
        "- Reproduce: scripts/train_demo_models.sh (the `attnscope glyphs --format npy` folders, then "
        "`scripts/train_demo_clip.py --steps %d --batch %d --patch %d --vision-width %d --vision-layers %d "
        "--text-width %d --text-layers %d --embed-dim %d --digit-only %g --lr %g --warmup %d --seed %d --threads %d`)"
        % (summary["steps"], summary["batch"], a["patch"], a["vision_width"], a["vision_layers"], a["text_width"],
           a["text_layers"], a["embed_dim"], summary.get("digit_only", 0.0), summary["lr"], summary["warmup"],
           summary["seed"], summary["threads"]),
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


# The bundled assets/images/sign_<digit>.png are these held-out seeds (assets/images/ATTRIBUTION.md).
BUNDLED_SIGNS = {1000000000001: "sign_4.png", 1000000000002: "sign_8.png", 1000000000004: "sign_6.png",
                 1000000000005: "sign_1.png"}


@torch.no_grad()
def bundled_sign_scores(model, images, scenes, tokens):
    """[(file, top digit, its probability over the ten digit prompts)] for the bundled signs."""
    model.eval()
    text = model.encode_text(tokens.ids(["the digit %d" % d for d in range(10)]))
    text = text / text.norm(dim=-1, keepdim=True)
    scores = []
    for index, scene in enumerate(scenes):
        if scene.seed in BUNDLED_SIGNS:
            image = model.encode_image(prepare(images[index:index + 1]))
            image = image / image.norm(dim=-1, keepdim=True)
            probabilities = (model.logit_scale.exp() * image @ text.T).softmax(-1)[0]
            top = int(probabilities.argmax())
            scores.append((BUNDLED_SIGNS[scene.seed], top, float(probabilities[top])))
    model.train()
    return sorted(scores)


def parameter_groups(model, weight_decay):
    """Decay on matrices only (not on gains, biases, embeddings, logit_scale), as CLIP's trainers do."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        plain = parameter.ndim < 2 or "embedding" in name or name.endswith("logit_scale")
        (no_decay if plain else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--card-only", action="store_true",
                        help="score the weights already at --out on --held-out and write the card (after a run "
                             "stopped at one of its checkpoints)")
    parser.add_argument("--train", help="folder of `attnscope glyphs --format npy` (training seeds)")
    parser.add_argument("--held-out", required=True, help="the same for held-out seeds (from 10^12)")
    parser.add_argument("--out", required=True, help="the safetensors file to write; the card goes beside it (.md)")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--digit-only", type=float, default=0.0,
                        help="share of captions that are the digit alone, drawn before the usual mix")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--patch", type=int, default=16)
    parser.add_argument("--vision-width", type=int, default=128)
    parser.add_argument("--vision-layers", type=int, default=4)
    parser.add_argument("--text-width", type=int, default=64)
    parser.add_argument("--text-layers", type=int, default=4)
    parser.add_argument("--embed-dim", type=int, default=128)
    parser.add_argument("--checkpoint-every", type=int, default=0,
                        help="also save (and score on 300 held-out images) every N steps")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda where a GPU is at hand (not bitwise CPU's)")
    args = parser.parse_args()
    if args.card_only:
        card_only(args)
        return
    if not args.train:
        parser.error("--train is required")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    tokenizer = Tokenizer.from_openai_gz(os.path.join(ROOT, "assets", "clip", "bpe_simple_vocab_16e6.txt.gz"))
    tokens = TokenCache(tokenizer)

    train_images, held_images = load_images(args.train), load_images(args.held_out)
    size = train_images.shape[1]
    train_scenes, held_scenes = read_scenes(args.train, size), read_scenes(args.held_out, size)
    assert len(train_scenes) == len(train_images) and len(held_scenes) == len(held_images)

    model = CLIP(args.embed_dim, size, args.patch, args.vision_width, args.vision_layers, 77,
                 len(tokenizer.encoder), args.text_width, args.text_layers).to(args.device)
    optimizer = torch.optim.AdamW(parameter_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.98), eps=1e-6)

    # Linear warm-up, then constant: the weights after K steps do not depend on --steps, so each
    # checkpoint written on the way is exactly what `--steps K` gives.
    def learning_rate(step):
        return args.lr * min(1.0, (step + 1) / args.warmup)

    def save(step_count, elapsed, losses, images, scenes):
        """The weights as saved (float16, as OpenAI releases CLIP; attnscope computes in float32),
        their zero-shot accuracy on the held-out images, and the training summary beside them."""
        state = {name: tensor.detach().cpu().half().float() for name, tensor in model.state_dict().items()}
        saved = CLIP(args.embed_dim, size, args.patch, args.vision_width, args.vision_layers, 77,
                     len(tokenizer.encoder), args.text_width, args.text_layers)
        saved.load_state_dict(state)
        results = evaluate(saved, images, scenes, tokens)
        signs = bundled_sign_scores(saved, images, scenes, tokens)
        save_file(state, args.out, dtype=torch.float16, metadata=FILE_METADATA)
        summary = {
            "steps": step_count, "batch": args.batch, "lr": args.lr, "weight_decay": args.weight_decay,
            "warmup": args.warmup, "digit_only": args.digit_only, "seed": args.seed, "seconds": int(round(elapsed)), "threads": args.threads,
            "device": args.device, "final_loss": float(np.mean(losses[-50:])),
            "logit_scale": float(saved.logit_scale.exp()), "held_out_images": len(scenes),
            "train_images": len(train_scenes), "zero_shot": results, "bundled_signs": signs,
            "architecture": {"image": size, "patch": args.patch, "vision_width": args.vision_width,
                             "vision_layers": args.vision_layers, "text_width": args.text_width,
                             "text_layers": args.text_layers, "embed_dim": args.embed_dim, "context": 77},
            "parameters": sum(p.numel() for p in saved.parameters()),
        }
        with open(os.path.splitext(args.out)[0] + "_training.json", "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
        if len(scenes) == len(held_scenes):
            write_card(os.path.splitext(args.out)[0] + ".md", summary)
        print("saved after %d steps; held-out %d: %s" % (step_count, len(scenes), json.dumps(results)), flush=True)

    started = time.time()
    order = rng.permutation(len(train_scenes))
    cursor = 0
    losses = []
    for step in range(args.steps):
        if cursor + args.batch > len(order):
            order, cursor = rng.permutation(len(train_scenes)), 0
        picked = np.sort(order[cursor:cursor + args.batch])
        cursor += args.batch
        scenes = [train_scenes[i] for i in picked]
        captions = [random_caption(scene, rng, args.digit_only) for scene in scenes]
        truth = torch.tensor([[caption_true(c, s) for c in captions] for s in scenes], dtype=torch.float32)
        truth = truth.to(args.device)
        images = prepare(train_images[picked]).to(args.device)
        ids = tokens.ids([caption_text(c) for c in captions]).to(args.device)

        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)
        image_features = model.encode_image(images)
        text_features = model.encode_text(ids)
        image_features = image_features / image_features.norm(dim=-1, keepdim=True)
        text_features = text_features / text_features.norm(dim=-1, keepdim=True)
        logits = model.logit_scale.exp() * image_features @ text_features.T  # [images, captions]
        image_loss = -(truth / truth.sum(1, keepdim=True) * logits.log_softmax(1)).sum(1).mean()
        text_loss = -(truth / truth.sum(0, keepdim=True) * logits.log_softmax(0)).sum(0).mean()
        loss = (image_loss + text_loss) / 2
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        losses.append(loss.item())
        if step % 25 == 0 or step == args.steps - 1:
            print("step %d loss %.4f scale %.1f lr %.2e %.0fs" % (step, np.mean(losses[-50:]),
                  model.logit_scale.exp().item(), learning_rate(step), time.time() - started), flush=True)
        if args.checkpoint_every and (step + 1) % args.checkpoint_every == 0 and step + 1 < args.steps:
            save(step + 1, time.time() - started, losses, held_images[:300], held_scenes[:300])
    save(args.steps, time.time() - started, losses, held_images, held_scenes)


def card_only(args):
    """Scores the saved weights (--out) on every held-out image and writes the card, with the training
    facts of the summary a checkpoint wrote beside them (its step count is the recipe's --steps)."""
    summary_path = os.path.splitext(args.out)[0] + "_training.json"
    with open(summary_path) as f:
        summary = json.load(f)
    a = summary["architecture"]
    tokenizer = Tokenizer.from_openai_gz(os.path.join(ROOT, "assets", "clip", "bpe_simple_vocab_16e6.txt.gz"))
    model = CLIP(a["embed_dim"], a["image"], a["patch"], a["vision_width"], a["vision_layers"], 77,
                 len(tokenizer.encoder), a["text_width"], a["text_layers"])
    model.load_state_dict({name: tensor.float() for name, tensor in load_file(args.out).items()})
    held_images = load_images(args.held_out)
    held_scenes = read_scenes(args.held_out, held_images.shape[1])
    tokens = TokenCache(tokenizer)
    summary["zero_shot"] = evaluate(model, held_images, held_scenes, tokens)
    summary["bundled_signs"] = bundled_sign_scores(model, held_images, held_scenes, tokens)
    summary["held_out_images"] = len(held_scenes)
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    write_card(os.path.splitext(args.out)[0] + ".md", summary)
    print("held-out %d: %s" % (len(held_scenes), json.dumps(summary["zero_shot"])), flush=True)


if __name__ == "__main__":
    main()
