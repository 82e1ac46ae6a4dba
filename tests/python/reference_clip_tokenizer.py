"""Independent reference of CLIP's text tokenizer, written from OpenAI's clip/simple_tokenizer.py
(SimpleTokenizer: bytes_to_unicode, basic_clean, whitespace_clean, bpe, encode, decode) and clip/clip.py
(tokenize, truncate=False), with the vocab.json/merges.txt reading of transformers'
models/clip/tokenization_clip.py (CLIPTokenizer.__init__) for Hugging Face folders.

ftfy.fix_text, the first step of basic_clean, is the identity here: ftfy is not installed, and
attnscope's C++ tokenizer does not reproduce it either. Everything else follows the anchors, with the
`regex` module (Debian's python3-regex) that simple_tokenizer.py imports as `re`.
"""
import gzip
import html
import json

import regex

CONTEXT_LENGTH = 77
# simple_tokenizer.py keeps merges[1:49152-256-2+1]
MERGE_COUNT = 49152 - 256 - 2
START, END = "<|startoftext|>", "<|endoftext|>"
SPLIT = regex.compile(
    r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""",
    regex.IGNORECASE)
SPACES = regex.compile(r"\s+")


def byte_alphabet():
    """bytes_to_unicode: (the bytes in id order, byte -> character). Printable bytes stand for
    themselves and come first; the others take U+0100 onwards in byte order."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    others = [b for b in range(256) if b not in printable]
    char = {b: chr(b) for b in printable}
    char.update({b: chr(0x100 + k) for k, b in enumerate(others)})
    return printable + others, char


def basic_clean(text):
    # OpenAI: ftfy.fix_text(text) first (identity here), then html.unescape twice, then strip.
    return html.unescape(html.unescape(text)).strip()


def whitespace_clean(text):
    return SPACES.sub(" ", text).strip()


def cleaned(text):
    """What the split pattern runs on."""
    return whitespace_clean(basic_clean(text)).lower()


def split_words(text):
    return SPLIT.findall(cleaned(text))


class Tokenizer:
    def __init__(self, encoder, merges, source):
        self.encoder = encoder
        self.decoder = {i: s for s, i in encoder.items()}
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.source = source
        _, self.byte_char = byte_alphabet()
        self.char_byte = {c: b for b, c in self.byte_char.items()}
        self.known = {START: [START], END: [END]}

    @classmethod
    def from_openai_gz(cls, path):
        with gzip.open(path) as f:
            lines = f.read().decode("utf-8").split("\n")
        merges = [tuple(line.split()) for line in lines[1:MERGE_COUNT + 1]]
        order, char = byte_alphabet()
        symbols = [char[b] for b in order]
        symbols = symbols + [s + "</w>" for s in symbols] + ["".join(m) for m in merges] + [START, END]
        return cls({s: i for i, s in enumerate(symbols)}, merges, "openai")

    @classmethod
    def from_hf_files(cls, vocab_json, merges_txt):
        with open(vocab_json, encoding="utf-8") as f:
            encoder = json.load(f)
        with open(merges_txt, encoding="utf-8") as f:
            lines = f.read().strip().split("\n")[1:MERGE_COUNT + 1]
        return cls(encoder, [tuple(line.split()) for line in lines], "hf")

    def bpe(self, token):
        """The symbols of one byte-encoded word: greedy merges of the lowest-ranked adjacent pair."""
        if token in self.known:
            return self.known[token]
        parts = list(token[:-1]) + [token[-1] + "</w>"]
        while len(parts) > 1:
            ranked = [(self.ranks[pair], pair) for pair in zip(parts, parts[1:]) if pair in self.ranks]
            if not ranked:
                break
            first, second = min(ranked)[1]
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == first and parts[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        self.known[token] = parts
        return parts

    def encode(self, text):
        ids = []
        for word in split_words(text):
            token = "".join(self.byte_char[b] for b in word.encode("utf-8"))
            ids += [self.encoder[s] for s in self.bpe(token)]
        return ids

    def decode(self, ids):
        symbols = "".join(self.decoder[i] for i in ids)
        raw = bytes(self.char_byte[c] for c in symbols)
        return raw.decode("utf-8", errors="replace").replace("</w>", " ")

    def tokenize(self, texts, context_length=CONTEXT_LENGTH):
        """clip.tokenize with truncate=False: rows of start, ids, end, zeros; RuntimeError when longer."""
        rows = []
        for text in texts:
            tokens = [self.encoder[START]] + self.encode(text) + [self.encoder[END]]
            if len(tokens) > context_length:
                raise RuntimeError(f"Input {text} is too long for context length {context_length}")
            rows.append(tokens + [0] * (context_length - len(tokens)))
        return rows

    def save_hf_files(self, vocab_json, merges_txt):
        """vocab.json and merges.txt as transformers' CLIPTokenizer.save_vocabulary writes them."""
        with open(vocab_json, "w", encoding="utf-8") as f:
            f.write(json.dumps(self.encoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        with open(merges_txt, "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for pair, _ in sorted(self.ranks.items(), key=lambda item: item[1]):
                f.write(" ".join(pair) + "\n")
