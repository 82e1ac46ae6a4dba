"""Independent reference for SigLIP / SigLIP 2 prompt -> token ids, written from transformers' SiglipTokenizer and
GemmaTokenizerFast (as SigLIP 2's folders configure them), open_clip's HFTokenizer(clean="canonicalize") and
big_vision's pipeline (the sources and the rules: docs/models.md, "SigLIP's text side").

Only the `sentencepiece` module and the standard library are used
(Debian python3-sentencepiece 0.1.97 works: run with /usr/bin/python3).

    siglip_tokenize(sp_model_path, texts, context_length=64, flavour=...)

flavours (docs/models.md cites the source of every rule):

  "siglip"     transformers SiglipTokenizer (slow; the only class AutoTokenizer
               uses for google/siglip-*), called as processor(text=...,
               padding="max_length", truncation=True): per-char lower-case,
               canonicalize_text (ASCII punctuation removed, \\s+ -> " ",
               strip), the "<unk>"-prefix encode with add_dummy_prefix=False,
               "</s>" appended, padded with "</s>" (id 1).
  "siglip2"    transformers GemmaTokenizerFast as shipped with google/siglip2-*
               (add_bos_token=False, add_eos_token=True, padding_side=right):
               raw text, Gemma spm encode, "<eos>" (1) appended, "<pad>" (0).
               NO lower-casing (pass lower=True for the model-card advice /
               transformers-v5 Siglip2Tokenizer / big_vision behaviour).
  "open_clip"  open_clip HFTokenizer(clean="canonicalize") for every
               *-SigLIP*/*-SigLIP2* config: ftfy+html clean, open_clip
               canonicalize_text ("_"->" ", punctuation removed, lower, split/
               join), spm encode, eos appended, pad 1 (T5/c4 vocab) or 0 (Gemma).
  "big_vision" the original JAX pipeline (SigLIP_demo / SigLIP2_demo colabs):
               ASCII lower-case only, NO punctuation removal, spm encode, eos
               appended ("sticky"), pad 1 (c4_en) or sp.pad_id() (gemma).

All flavours use "sticky" EOS truncation: if content+eos would exceed
context_length the content is cut to context_length-1 and eos is appended, so
ids[-1] of a truncated row is always eos.  No flavour adds BOS.
"""

import html
import os
import re
import string
import sys
import tempfile
import unicodedata

import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"
FLAVOURS = ("siglip", "siglip2", "open_clip", "big_vision")

_PUNCT_TABLE = str.maketrans("", "", string.punctuation)  # ASCII only: !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~
# Serialized-protobuf patch equivalent to transformers' SiglipTokenizer.get_spm_processor():
#   ModelProto.normalizer_spec (field 3, length-delimited) { add_dummy_prefix (field 3, varint) = false }
# Appending an embedded-message field to a serialized proto MERGES it into the existing one.
_NO_DUMMY_PREFIX_PATCH = b"\x1a\x02\x18\x00"


# --------------------------------------------------------------------------- text cleaning
def hf_canonicalize_text(text):
    """transformers SiglipTokenizer.canonicalize_text(text, keep_punctuation_exact_string=None)."""
    text = text.translate(_PUNCT_TABLE)
    text = re.sub(r"\s+", " ", text)
    return text.strip()


def open_clip_canonicalize_text(text):
    """open_clip tokenizer.canonicalize_text (same as big_vision prompt_engineering.canonicalize_text)."""
    text = text.replace("_", " ")
    text = text.translate(_PUNCT_TABLE)
    text = text.lower()
    text = " ".join(text.split())
    return text.strip()


_SINGLE_QUOTE_RE = re.compile("[\u02bc\u2018-\u201b]")
_DOUBLE_QUOTE_RE = re.compile("[\u201c-\u201f]")
_TERMINAL_ESC_RE = re.compile("\033\\[((?:\\d|;)*)([a-zA-Z])")
_LIGATURES = "\u0132\u0133\u0149\u01c4\u01c5\u01c6\u01c7\u01c8\u01c9\u01ca\u01cb\u01cc\u01f1\u01f2\u01f3" \
             "\ufb00\ufb01\ufb02\ufb03\ufb04\ufb05\ufb06"
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f\u206a-\u206f\ufeff\ufff9-\ufffc"
                         "\U0001d173-\U0001d17a\U000e0000-\U000e007f]")


def _ftfy_lite(text):
    """The parts of ftfy.fix_text() (default config) that matter for prompts.

    Not emulated: ftfy's mojibake detection/re-decoding (fix_encoding,
    decode_inconsistent_utf8, fix_c1_controls, ...).  For text that is not
    mojibake this is identical to ftfy.fix_text."""
    if "<" not in text:                      # unescape_html="auto"
        text = html.unescape(text)
    text = _TERMINAL_ESC_RE.sub("", text)    # remove_terminal_escapes
    text = "".join(unicodedata.normalize("NFKC", c) if c in _LIGATURES else c for c in text)  # fix_latin_ligatures
    text = "".join(unicodedata.normalize("NFKC", c) if ("\uff01" <= c <= "\uff5e" or c == "\u3000") else c
                   for c in text)            # fix_character_width (ASCII-range fullwidth + ideographic space)
    text = _SINGLE_QUOTE_RE.sub("'", text)   # uncurl_quotes
    text = _DOUBLE_QUOTE_RE.sub('"', text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n") \
               .replace("\u2029", "\n").replace("\x85", "\n")  # fix_line_breaks
    text = _CONTROL_RE.sub("", text)         # remove_control_chars
    return unicodedata.normalize("NFC", text)


def open_clip_basic_clean(text):
    """open_clip tokenizer.basic_clean: ftfy.fix_text, html.unescape twice, strip."""
    text = _ftfy_lite(text)
    text = html.unescape(html.unescape(text))
    return text.strip()


def _ascii_lower(text):
    """tf.strings.lower(x) with default encoding='' lower-cases ASCII only."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _split_on_specials(text, specials, strip_around):
    """Left-to-right longest-match split (transformers Trie.split / tokenizers added-token split).
    Returns list of (is_special, str)."""
    out, buf, i = [], [], 0
    specials = sorted(specials, key=len, reverse=True)
    while i < len(text):
        for s in specials:
            if s and text.startswith(s, i):
                out.append((False, "".join(buf)))
                out.append((True, s))
                buf, i = [], i + len(s)
                break
        else:
            buf.append(text[i])
            i += 1
    out.append((False, "".join(buf)))
    if strip_around:  # AddedToken(lstrip=True, rstrip=True) as SiglipTokenizer declares them
        for k, (sp_, s) in enumerate(out):
            if sp_:
                if k + 1 < len(out) and not out[k + 1][0]:
                    out[k + 1] = (False, out[k + 1][1].lstrip())
                if k > 0 and not out[k - 1][0]:
                    out[k - 1] = (False, out[k - 1][1].rstrip())
    return out


# --------------------------------------------------------------------------- model wrapper
class _Spm:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.proto = f.read()
        self.sp = spm.SentencePieceProcessor()
        self.sp.LoadFromSerializedProto(self.proto)
        self._nodummy = None
        eos_piece = self.sp.id_to_piece(self.sp.eos_id()) if self.sp.eos_id() >= 0 else ""
        # SigLIP (c4_en / mc4) vocabularies are T5 style: <pad>=0 </s>=1 <unk>=2, no <s>.
        # SigLIP 2 uses the Gemma vocabulary: <pad>=0 <eos>=1 <bos>=2 <unk>=3 <mask>=4.
        self.family = "t5" if eos_piece == "</s>" else "gemma"

    @property
    def nodummy(self):
        if self._nodummy is None:
            self._nodummy = spm.SentencePieceProcessor()
            self._nodummy.LoadFromSerializedProto(self.proto + _NO_DUMMY_PREFIX_PATCH)
        return self._nodummy

    def control_pieces(self):
        return [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size()) if self.sp.is_control(i)]


_CACHE = {}


def _load(path):
    if path not in _CACHE:
        _CACHE[path] = _Spm(path)
    return _CACHE[path]


# --------------------------------------------------------------------------- flavours
def _hf_siglip_content_ids(m, text):
    """transformers SiglipTokenizer.tokenize -> convert_tokens_to_ids (no special tokens added)."""
    sp, nd = m.sp, m.nodummy
    unk, eos = "<unk>", "</s>"               # SiglipTokenizer defaults; pad_token is also "</s>"
    # SiglipTokenizer.tokenize: prepend SPIECE_UNDERLINE, existing U+2581 -> " "
    text = SPIECE_UNDERLINE + text.replace(SPIECE_UNDERLINE, " ")
    # PreTrainedTokenizer.tokenize: do_lower_case=True -> lower every char not inside a special token
    # (re.sub with "(specials)|(.+?)": one character at a time, so per-char str.lower()).
    text = "".join(c.lower() for c in text)
    unk_len = len(nd.encode(unk, out_type=str))   # SiglipTokenizer.unk_token_length
    tokens = []
    for is_special, chunk in _split_on_specials(text, [eos, unk], strip_around=True):
        if not chunk:
            continue
        if is_special:
            tokens.append(chunk)
            continue
        # SiglipTokenizer._tokenize
        c = hf_canonicalize_text(chunk)
        pieces = nd.encode(unk + c, out_type=str)
        tokens.extend(pieces[unk_len:] if len(pieces) >= unk_len else pieces)
    if len(tokens) > 1 and tokens[0] == SPIECE_UNDERLINE and tokens[1] in (eos, unk):
        tokens = tokens[1:]
    return [sp.piece_to_id(t) for t in tokens]


def siglip_fast_path_ids(sp_model_path, text):
    """Equivalent shortcut for the "siglip" content ids (what a C++ port can do):
    Encode(hf_canonicalize_text(per-char-lower(text))) with the UNMODIFIED model (add_dummy_prefix=True).
    Identical except when the text contains the literal strings "</s>" or "<unk>"."""
    m = _load(sp_model_path)
    t = "".join(c.lower() for c in text.replace(SPIECE_UNDERLINE, " "))
    return m.sp.encode(hf_canonicalize_text(t))


def _finish(content, eos_id, pad_id, context_length, truncate=True, eos_dedup=False):
    """prepare_for_model(truncation=True, padding='max_length'): truncate content so that
    content+eos fits, then append eos ("sticky"), then right-pad."""
    ids = list(content)
    if truncate and len(ids) + 1 > context_length:
        ids = ids[:context_length - 1]
    if not (eos_dedup and ids and ids[-1] == eos_id):   # T5/Siglip _add_eos_if_not_present
        ids.append(eos_id)
    if len(ids) < context_length:
        ids += [pad_id] * (context_length - len(ids))
    return ids


def siglip_tokenize(sp_model_path, texts, context_length=64, flavour="siglip", lower=None,
                    truncate=True, return_meta=False):
    """Return a list of `context_length`-long id lists (one per text).

    lower: only for flavour "siglip2" (default False = transformers-v4 GemmaTokenizerFast exactly;
           True = Python str.lower() first, i.e. the model card advice / v5 Siglip2Tokenizer).
    """
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {FLAVOURS}")
    if isinstance(texts, str):
        texts = [texts]
    m = _load(sp_model_path)
    sp = m.sp
    rows = []
    if flavour == "siglip":
        eos_id = sp.piece_to_id("</s>")
        pad_id = eos_id                       # pad_token="</s>"
        for t in texts:
            rows.append(_finish(_hf_siglip_content_ids(m, t), eos_id, pad_id, context_length, truncate,
                                eos_dedup=True))
    elif flavour == "siglip2":
        eos_id, pad_id = sp.eos_id(), sp.pad_id()       # Gemma: <eos>=1, <pad>=0
        specials = m.control_pieces()                   # <pad>/<eos>/<bos>: added tokens in tokenizer.json
        for t in texts:
            if lower:
                t = t.lower()
            content = []
            for is_special, chunk in _split_on_specials(t, specials, strip_around=False):
                if is_special:
                    content.append(sp.piece_to_id(chunk))
                elif chunk:
                    content.extend(sp.encode(chunk))
            rows.append(_finish(content, eos_id, pad_id, context_length, truncate))
    elif flavour == "open_clip":
        eos_id = sp.eos_id()
        pad_id = eos_id if m.family == "t5" else sp.pad_id()   # SigLipTokenizer: pad 1 (c4/mc4) / 0 (gemma)
        for t in texts:
            c = open_clip_canonicalize_text(open_clip_basic_clean(t))
            rows.append(_finish(sp.encode(c), eos_id, pad_id, context_length, truncate))
    else:  # big_vision
        eos_id = sp.eos_id()
        pad_id = 1 if m.family == "t5" else sp.pad_id()        # demo pad_value=1 / tokenizer.pad_token
        for t in texts:
            rows.append(_finish(sp.encode(_ascii_lower(t)), eos_id, pad_id, context_length, truncate))
    if return_meta:
        return rows, {"eos_id": eos_id, "pad_id": pad_id, "family": m.family}
    return rows
