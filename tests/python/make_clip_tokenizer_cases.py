#!/usr/bin/python3
"""Generate the CLIP tokenizer's cases from the independent reference (reference_clip_tokenizer.py) on
OpenAI's vocabulary (the bundled assets/clip/bpe_simple_vocab_16e6.txt.gz) and on the Hugging Face files
written from it here (hf/vocab.json, hf/merges.txt, as transformers' save_vocabulary writes them).

Usage: /usr/bin/python3 tests/python/make_clip_tokenizer_cases.py OUTDIR

OUTDIR/cases.json:
- prompts: {text, cleaned (what the split runs on), words (re.findall), ids (encode), ids_hf (encode with
  the HF files), decoded (decode(ids)), row (clip.tokenize's row, null when refused), tokens (with start
  and end)} over a corpus meant to break every rule: ASCII, punctuation, contractions (and long s, which
  IGNORECASE matches as 's'), digits, many scripts with combining marks, emoji, HTML entities, every kind of
  whitespace, U+0130, final sigma, prompts of exactly 75 and 76 tokens, and seeded random strings drawn
  from every general category;
- bulk: 1,000 prompts of about ten words (the speed check) with their ids;
- html: {text, unescaped} for html.unescape alone (every entity name, numeric edges, random strings);
- lower: {text, lowered} for str.lower alone (final sigma contexts);
- replace: {bytes (hex), text} for bytes.decode("utf-8", errors="replace") alone;
- decode: {ids, text} for decode on seeded random ids and byte sequences;
- bad_files: corrupt vocabulary files in OUTDIR/bad/ with a fragment the refusal must contain.
OUTDIR/unicode_tables.json: per code point (runs of [first code point, value]) the regex module's class
under IGNORECASE (L, N, O, or S for none), Python's Final_Sigma context (I ignorable, C cased, O other, ? not
assigned in this Python's unicodedata), str.lower's changes, str.isspace, the regex module's \\s, and the
IGNORECASE partners of the pattern's letters.
"""
import gzip
import json
import os
import random
import shutil
import sys
import time
import unicodedata

if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
    # Debian's python3-regex (Unicode 15.0, as utf8proc 2.8): another regex build may know another Unicode.
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)

import html  # noqa: E402

import regex  # noqa: E402

import reference_clip_tokenizer as ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OPENAI_GZ = os.path.normpath(os.path.join(HERE, "..", "..", "assets", "clip", "bpe_simple_vocab_16e6.txt.gz"))

ASCII_PROMPTS = [
    "a photo of a dog", "A PHOTO OF A CAT.", "the digit 4", "a purple R", "  lead and trail  ", "",
    "hello,world", "!!!???...", "(a)[b]{c}", "e-mail: someone@example.com", "C++ && C#", "50% off -- now!",
    "x=y+z*2", "~`^_|\\/", "The Quick Brown Fox Jumps Over The Lazy Dog", "supercalifragilisticexpialidocious",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis", "a" * 60,
]
SPECIAL_PROMPTS = [
    "<|startoftext|>a photo<|endoftext|>", "<|STARTOFTEXT|> <|EndOfText|>", "<|\u017ftartoftext|>", "!!<|endoftext|>",
    "a<|endoftext|>b", "<|startoftext|", "<<|endoftext|>>", "<|endoftext|><|endoftext|>",
]
CONTRACTIONS = [
    "it's", "IT'S", "they're we've I'm you'll he'd don't", "'s's", "rock'n'roll", "it'\u017f", "'ll'd'x", "O'Neil's",
    "it\u2019s", "''s", "'", "'S'T'RE'VE'M'LL'D", "'re're", "'x", "'1", "'\u017f\u017f", "can't've",
]
DIGITS = [
    "1234567890", "\uff13\uff14\uff15", "\u0663\u0664\u0665", "\u00b2\u00b3\u00bc", "\u216b \u2170", "1,000,000.50",
    "3.14159", "v2.0-rc1", "\u0967\u0968\u0969 \u09e7", "a1b2c3", "\U0001d7d8\U0001d7d9",
]
SCRIPTS = [
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m", "cafe\u0301 nai\u0308ve", "\u00dcn\u00efc\u00f6d\u00e9",
    "\u03a3\u03af\u03c3\u03c5\u03c6\u03bf\u03c2 \u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440", "\u4e00\u53ea\u732b\u5728\u684c\u5b50\u4e0a",
    "\u3072\u3089\u304c\u306a\u30ab\u30bf\u30ab\u30ca", "\ud55c\uad6d\uc5b4", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "stra\u00dfe STRASSE \u1e9e", "\u01c5ungla \u01c4", "\u0149", "\u212a\u212b",
    "\u1f88\u1fbc \u1fb3", "\u0130stanbul", "\u0130", "D\u0130YARBAKIR", "I\u0307", "\u0345", "a\u0345b", "\u0391\u0345",
    "\u10a0\u13a0\u13f8", "\U00010400\U00010428", "\u2c2f\ua7c0", "\U0001e900\U0001e922",
]
SYMBOLS = [
    "\U0001f436\U0001f431 dog cat", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1eb\U0001f1f7",
    "\u00a9\u00ae\u2122 \u2211\u222b\u221a \u2192 \u21d2 \u2605 \u2665 \u20ac$\u00a3\u00a5", "\u24b6\u24d0 \U0001f130",
    "\u2603\ufe0f", "\ufffd", "\ue000\U000f0000", "\u200bzero\u200cwidth\u200d", "\u00ad", "\u0000nul", "\x7f\x80\x9f",
]
HTML_PROMPTS = [
    "&amp;lt;", "&notit;", "&#0;", "&#x110000;", "&#150;", "&amp;amp;amp;", "&lt&gt", "&AMP;", "&#x41;&#65;&#X42",
    "&#xD800;", "&#1114111;", "&#11;", "&#x7f;", "&nbsp;x&nbsp;", "&#x2028;", "a&#10;b", "a&#13;b", "&#x85;",
    "&NotNestedGreaterGreater;", "&acE;", "&ampx", "&#38;lt;", "&" + "a" * 40, "&& &; &#; &#x; & amp;", "&ltx", "&notin;",
    "&ni", "&#00065", "&#x0000041;", "&#99999999999999999999;", "&#x1F600;", "&#128512", "&Sigma;&sigma;&#931;",
    "&#x130;", "&#383;", "&#x27;s", "it&apos;s", "&#39;ll", "&quot;quoted&quot;", "&lt;|endoftext|&gt;",
    "&amp;#x26;", "&#x26;amp;", "&#38;#38;", "&#x1c;a&#x1c;", "&copy2023", "&frac12;&frac12", "&AElig&aeligx",
    "&#x;", "&#;", "&x41;", "&#X;", "&;", "&\u00e9t\u00e9;", "&not\u00e9", "&ThickSpace;", "&NewLine;x&Tab;",
]
WHITESPACE = [
    "a\u00a0b", "a\u2028b", "a\u0085b", "a\u001cb", "\u001c a \u001f", "\t\n\r\x0b\x0c", "a\u3000b\u205fc", "\u180e",
    "a \t\n b", "\u2029x\u2029", "\u1680\u2000\u200a\u202f", "a\u001d\u001e b", "x\x1c", " \x1fy",
    "\u00a0\u00a0lead", "trail\u2028", "a\u200bb", "a \u001c b", "a\u00a0\u001fb", "a\u2028\u001d\u2029b",
]
SIGMA = [
    "\u039f\u0394\u039f\u03a3", "\u039f\u0394\u039f\u03a3.", "\u03a3", "\u0391\u03a3'\u0392", "\u0391\u03a3\u0301",
    "A\u0345\u03a3", "\u00aa\u03a3", "\u24b6\u03a3", "\u03a3\u0391", "A.\u03a3", "1\u03a3", "A\u03a3 B", "A\u03a3\u00ad",
    "\u03a3\u03a3\u03a3", "A\u03a3'", "A'\u03a3", "A\u02b0\u03a3", "\u2160\u03a3", "A\u03a3\u2160", "\U0001f130\u03a3",
    "\u0130\u03a3", "\u1fbc\u03a3", "A:\u03a3:", "\u03b1\u03a3\u0391",
]
SPECIAL_CHARS = [
    "\u03a3", "\u0130", "\u017f", "\u0345", "'", "&", "#", ";", "s", "t", "<", "|", ">", " ", "\u00a0", "\u001c", "\u0085",
    "\u2028", "\u00aa", "\u24b6", "\u216b", "\u212a", "\u00df", "\u1e9e", "\u0149", "\u01c5", "\u0301", "\u02b0", "\u00ad",
    "x", "X", "e", "d", "l", "m", "r", "v", "0", "9", "\u0660", "\u200d", "\U0001f600",
]


def assigned(cp):
    return not (0xD800 <= cp <= 0xDFFF) and unicodedata.category(chr(cp)) != "Cn"


def character_pool(rng):
    """A few hundred code points: up to 12 of every general category this Python knows, and the
    characters the rules single out."""
    by_category = {}
    for cp in range(0x110000):
        if assigned(cp):
            by_category.setdefault(unicodedata.category(chr(cp)), []).append(cp)
    pool = []
    for category in sorted(by_category):
        members = by_category[category]
        pool += [chr(cp) for cp in rng.sample(members, min(12, len(members)))]
    return pool + SPECIAL_CHARS


def random_strings(rng, pool, count, longest):
    letters = "abcdefghijklmnopqrstuvwxyz ABC'"
    out = []
    for _ in range(count):
        n = rng.randint(1, longest)
        out.append("".join(rng.choice(pool) if rng.random() < 0.6 else rng.choice(letters) for _ in range(n)))
    return out


def exact_length_prompts(tokenizer):
    """Prompts of exactly 75 and 76 BPE tokens (77 and 78 with the start and end tokens)."""
    words = ["a", "photo", "of", "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "!",
             "supercalifragilistic", "123", "caf\u00e9", "\u03a3\u039f\u03a3"]
    prompt, k = "", 0
    while True:
        candidate = (prompt + " " + words[k % len(words)]).strip()
        k += 1
        n = len(tokenizer.encode(candidate))
        if n == 75:
            prompt = candidate
            break
        if n < 75:
            prompt = candidate
        else:
            prompt = (prompt + " a").strip()
            if len(tokenizer.encode(prompt)) == 75:
                break
    longer = prompt + " a"
    assert len(tokenizer.encode(prompt)) == 75 and len(tokenizer.encode(longer)) == 76
    return [prompt, longer, "  " + prompt + "\u2028", "&amp;" * 37 + "&", "x" + " &lt;" * 74]


def long_words(rng):
    """Words of hundreds of bytes (one split match each): the merge order over many occurrences."""
    return ["a" * 999, "ab" * 400, "!" * 700, "".join(rng.choice("abc") for _ in range(800)),
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(800)),
            "".join(rng.choice("\u00e9\u00e8\u03b1\u4e00e") for _ in range(300)), "\U0001f600" * 200]


def long_prompts():
    return [
        " ".join(["a photo of a very long prompt"] * 20),
        "W1" * 150,
        "first line of a long prompt\n" + "word " * 100,
        "\u4e00" * 200,
    ]


def unicode_tables():
    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    everything = "".join(chr(cp) for cp in code_points)

    def matching(pattern, flags=0):
        """The code points a one-character pattern matches (searched over one string of them all)."""
        return {code_points[m.start()] for m in regex.finditer(pattern, everything, flags)}

    letters = matching(r"[\p{L}]", regex.IGNORECASE)
    numbers = matching(r"[\p{N}]", regex.IGNORECASE)
    others = matching(r"[^\s\p{L}\p{N}]", regex.IGNORECASE)

    def split_class(cp):
        return "L" if cp in letters else "N" if cp in numbers else "O" if cp in others else "S"

    def sigma_context(cp):
        if not assigned(cp):
            return "?"
        ch = chr(cp)
        after_char = (ch + "\u03a3").lower()[-1] == "\u03c2"  # final: ch is cased, not ignorable
        after_cased = ("A" + ch + "\u03a3").lower()[-1] == "\u03c2"  # final: ch is cased or skipped
        return "C" if after_char else "I" if after_cased else "O"

    def runs(value):
        out, last = [], None
        for cp in range(0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            v = value(cp)
            if v != last:
                out.append([cp, v])
                last = v
        return out

    lower = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        lowered = chr(cp).lower()
        if lowered != chr(cp):
            lower.append([cp, [ord(c) for c in lowered]])
    return {
        "python": sys.version.split()[0],
        "unicodedata": unicodedata.unidata_version,
        "regex": regex.__version__,
        "split_class": runs(split_class),
        "sigma_context": runs(sigma_context),
        "lower": lower,
        "isspace": [cp for cp in range(0x110000) if chr(cp).isspace()],
        "regex_space": sorted(matching(r"\s")),
        "pattern_letters": {c: sorted(matching(regex.escape(c), regex.IGNORECASE)) for c in "startofexndvml"},
    }


def html_cases(rng):
    texts = ["&" + name for name in sorted(html.entities.html5)]
    texts += ["&" + name + "x" for name in sorted(html.entities.html5) if not name.endswith(";")]
    texts += HTML_PROMPTS
    numbers = list(range(0, 0x21)) + list(range(0x7E, 0xA1)) + [0xD7FF, 0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xE000] + \
        list(range(0xFDCF, 0xFDF1)) + [0xFFFD, 0xFFFE, 0xFFFF, 0x1FFFE, 0x1FFFF, 0x10FFFD, 0x10FFFE, 0x10FFFF, 0x110000,
                                       0xFFFFFFFF, 0x100000000, 10 ** 30]
    for n in numbers:
        texts += [f"&#{n};", f"&#{n}", f"&#x{n:x};", f"&#X{n:X}z"]
    alphabet = list("&#xX;ampltngoiF019 <\t\r\n\f") + ["\u00e9", "AMP", "amp", "not", "lt;", "#x", "#1", "ampl"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14))) for _ in range(1500)]
    return [{"text": t, "unescaped": html.unescape(t)} for t in texts]


def lower_cases(rng):
    alphabet = ["\u03a3", "A", "a", "'", ".", "\u0345", "\u0300", "\u02b0", "\u00aa", "\u24b6", "1", " ", "\u0130",
                "\u00ad", "\u1fbc", "\u2160", "\u01c5", ":", "\u2019", "\u00b7", "\U0001f130", "\u037a"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(3000)]
    return [{"text": t, "lowered": t.lower()} for t in texts]


def replace_cases(rng):
    interesting = [0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1,
                   0xF3, 0xF4, 0xF5, 0xFF, 0x8F, 0x90, 0x9F, 0xA0]
    cases = [bytes([b]) for b in range(256)]
    cases += [bytes(rng.choice(interesting) for _ in range(rng.randint(1, 10))) for _ in range(3000)]
    cases += ["\u20ac\U0001f600a\u00e9".encode()[:k] for k in range(1, 11)]
    return [{"bytes": c.hex(), "text": c.decode("utf-8", errors="replace")} for c in cases]


def decode_cases(rng, tokenizer):
    order, _ = ref.byte_alphabet()
    byte_id = {b: i for i, b in enumerate(order)}
    cases = [[rng.randrange(len(tokenizer.encoder)) for _ in range(rng.randint(1, 20))] for _ in range(300)]
    for _ in range(300):
        raw = [rng.choice([0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xC3, 0xA9, 0xED, 0xA0, 0xC0, 0x41, 0xFF])
               for _ in range(rng.randint(1, 8))]
        cases.append([byte_id[b] + (256 if rng.random() < 0.3 else 0) for b in raw])
    return [{"ids": ids, "text": tokenizer.decode(ids)} for ids in cases]


def bulk_prompts(rng):
    words = ["a", "photo", "of", "the", "small", "large", "red", "green", "blue", "purple", "dog", "cat", "car", "digit",
             "letter", "sign", "with", "and", "in", "on", "left", "right", "top", "bottom", "corner", "bright", "dark",
             "painting", "sketch", "close-up", "blurry", "it's", "two", "3", "42", "caf\u00e9", "na\u00efve", "zebra",
             "xylophone", "quietly", "beautiful", "unbelievable", "mountains", "river's", "!", ",", "."]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 12))) for _ in range(1000)]


def bad_files(out):
    """Corrupt vocabulary files and the fragment each refusal must contain."""
    bad = os.path.join(out, "bad")
    os.makedirs(bad, exist_ok=True)
    with open(OPENAI_GZ, "rb") as f:
        good_gz = f.read()
    text = gzip.decompress(good_gz).decode("utf-8")
    lines = text.split("\n")
    cases = []

    def write(name, data):
        with open(os.path.join(bad, name), "wb") as f:
            f.write(data)
        return os.path.join("bad", name)

    def gz_case(name, data, expect):
        cases.append({"kind": "openai_gz", "files": [write(name, data)], "expect": expect})

    gz_case("truncated.txt.gz", good_gz[: len(good_gz) // 2], "truncated")
    flipped = bytearray(good_gz)
    flipped[len(flipped) // 2] ^= 0xFF
    gz_case("flipped.txt.gz", bytes(flipped), "corrupt")
    crc = bytearray(good_gz)
    crc[-6] ^= 0x01  # the CRC-32 in the trailer
    gz_case("bad_crc.txt.gz", bytes(crc), "corrupt")
    gz_case("not_gzip.txt.gz", text[:5000].encode(), "not a gzip file")
    gz_case("empty.txt.gz", b"", "not a gzip file")
    gz_case("trailing.txt.gz", good_gz + b"junk" * 10, "after its compressed data")
    gz_case("short.txt.gz", gzip.compress("\n".join(lines[:1001]).encode()), "holds 1000 merges")
    malformed = lines[:]
    malformed[500] = "a b c"
    gz_case("three_parts.txt.gz", gzip.compress("\n".join(malformed).encode()), "line 501 is not a merge of two symbols")
    malformed[500] = ""
    gz_case("empty_line.txt.gz", gzip.compress("\n".join(malformed).encode()), "line 501 is not a merge")
    gz_case("no_header.txt.gz", gzip.compress("\n".join(lines[1:]).encode()), "#version")
    gz_case("not_utf8.txt.gz", gzip.compress(text[:100000].encode() + b"\xff\xfe" + text[100000:].encode()), "not valid UTF-8")
    gz_case("bomb.txt.gz", gzip.compress(b"\n" * (80 << 20)), "inflates to more than")
    cases.append({"kind": "openai_gz", "files": ["bad/missing.txt.gz"], "expect": "no such file"})

    # Hugging Face files: a good pair written by the reference, then broken copies.
    with open(os.path.join(out, "hf", "vocab.json"), encoding="utf-8") as f:
        vocab_text = f.read()
    with open(os.path.join(out, "hf", "merges.txt"), encoding="utf-8") as f:
        merges_text = f.read()
    vocab = json.loads(vocab_text)

    def hf_case(name, vocab_data, merges_data, expect):
        folder = os.path.join(bad, name)
        os.makedirs(folder, exist_ok=True)
        files = []
        for file_name, data in (("vocab.json", vocab_data), ("merges.txt", merges_data)):
            if data is not None:
                with open(os.path.join(folder, file_name), "wb") as f:
                    f.write(data.encode("utf-8") if isinstance(data, str) else data)
        files = [os.path.join("bad", name)]
        cases.append({"kind": "hf_folder", "files": files, "expect": expect})

    hf_case("vocab_not_json", vocab_text[:1000], merges_text, "not valid JSON")
    hf_case("vocab_list", "[1, 2, 3]", merges_text, "not a JSON object")
    without = dict(vocab)
    del without["\u0120"]  # byte 0x20's symbol
    hf_case("vocab_lacks_byte", json.dumps(without), merges_text, "lacks")
    without = dict(vocab)
    del without["<|endoftext|>"]
    hf_case("vocab_lacks_end", json.dumps(without), merges_text, "the end token")
    without = dict(vocab)
    del without["in"]  # the result of the first merge, 'i n'
    hf_case("vocab_lacks_merge", json.dumps(without), merges_text, "the result of merge 1")
    twice = dict(vocab)
    twice["zzzz-extra"] = 7
    hf_case("vocab_duplicate_id", json.dumps(twice), merges_text, "gives id 7 to both")
    hf_case("vocab_duplicate_key", '{"a": 1, "a": 2}', merges_text, "twice")
    fractional = dict(vocab)
    fractional["a"] = 1.5
    hf_case("vocab_fraction", json.dumps(fractional), merges_text, "not an integer")
    negative = dict(vocab)
    negative["a"] = -3
    hf_case("vocab_negative", json.dumps(negative), merges_text, "not an integer")
    hf_case("vocab_deep", "[" * 100000 + "]" * 100000, merges_text, "deeper")
    merge_lines = merges_text.split("\n")
    hf_case("merges_no_header", vocab_text, "\n".join(merge_lines[1:]), "#version")
    broken = merge_lines[:]
    broken[10] = "onlyone"
    hf_case("merges_one_part", vocab_text, "\n".join(broken), "line 11 is not a merge of two symbols")
    hf_case("merges_empty", vocab_text, "#version: 0.2\n", "holds no merges")
    hf_case("merges_not_utf8", vocab_text, merges_text.encode() + b"\xc0\xaf", "not valid UTF-8")
    hf_case("merges_missing", vocab_text, None, "no such file")
    return cases


def synthetic_vocabulary(out):
    """A Hugging Face pair whose merges are not in learned order (a merge uses 'ab' before 'a b' makes it)
    and repeat a pair (its last rank counts, as in dict(zip(merges, ranks))): bpe() merges every
    occurrence of the lowest-ranked pair in one pass before any pair that pass creates."""
    folder = os.path.join(out, "synthetic")
    os.makedirs(folder, exist_ok=True)
    merges = [("ab", "a"), ("a", "b"), ("x", "y"), ("a", "b"), ("b", "a"), ("ba", "b</w>"), ("aba", "b")]
    order, char = ref.byte_alphabet()
    symbols = [char[b] for b in order]
    symbols += [s + "</w>" for s in symbols]
    for merge in merges:
        if "".join(merge) not in symbols:
            symbols.append("".join(merge))
    symbols += [ref.START, ref.END]
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({s: i for i, s in enumerate(symbols)}, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(" ".join(m) + "\n" for m in merges))
    tokenizer = ref.Tokenizer.from_hf_files(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))
    texts = ["ababx", "abababa", "abab", "aab", "abxy", "xyab", "babab", "ab ab", "aaabbb", "abaabab"]
    return [{"text": t, "ids": tokenizer.encode(t)} for t in texts]


def prompt_case(tokenizer, hf_tokenizer, text):
    ids = tokenizer.encode(text)
    try:
        row = tokenizer.tokenize([text])[0]
    except RuntimeError:
        row = None
    return {"text": text, "cleaned": ref.cleaned(text), "words": ref.split_words(text), "ids": ids,
            "ids_hf": hf_tokenizer.encode(text), "decoded": tokenizer.decode(ids), "row": row, "tokens": len(ids) + 2}


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    started = time.time()
    out = argv[1]
    os.makedirs(os.path.join(out, "hf"), exist_ok=True)
    shutil.copyfile(OPENAI_GZ, os.path.join(out, "bpe_simple_vocab_16e6.txt.gz"))
    tokenizer = ref.Tokenizer.from_openai_gz(OPENAI_GZ)
    assert len(tokenizer.encoder) == 49408
    tokenizer.save_hf_files(os.path.join(out, "hf", "vocab.json"), os.path.join(out, "hf", "merges.txt"))
    hf_tokenizer = ref.Tokenizer.from_hf_files(os.path.join(out, "hf", "vocab.json"), os.path.join(out, "hf", "merges.txt"))
    assert hf_tokenizer.encoder == tokenizer.encoder and hf_tokenizer.ranks == tokenizer.ranks

    rng = random.Random(34)
    pool = character_pool(rng)
    texts = (ASCII_PROMPTS + SPECIAL_PROMPTS + CONTRACTIONS + DIGITS + SCRIPTS + SYMBOLS + HTML_PROMPTS + WHITESPACE + SIGMA +
             exact_length_prompts(tokenizer) + long_prompts() + long_words(rng) + random_strings(rng, pool, 300, 16) +
             random_strings(rng, pool, 100, 40))
    prompts = [prompt_case(tokenizer, hf_tokenizer, t) for t in texts]
    bulk = bulk_prompts(rng)
    cases = {
        "vocab_size": len(tokenizer.encoder),
        "start": tokenizer.encoder[ref.START],
        "end": tokenizer.encoder[ref.END],
        "prompts": prompts,
        "bulk": [{"text": t, "ids": tokenizer.encode(t)} for t in bulk],
        "html": html_cases(rng),
        "lower": lower_cases(rng),
        "replace": replace_cases(rng),
        "decode": decode_cases(rng, tokenizer),
        "bad_files": bad_files(out),
        "synthetic": synthetic_vocabulary(out),
    }
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=True)
    with open(os.path.join(out, "unicode_tables.json"), "w") as f:
        json.dump(unicode_tables(), f, ensure_ascii=True)
    refused = sum(1 for p in prompts if p["row"] is None)
    print(f"{len(prompts)} prompts ({refused} over 77 tokens), {len(bulk)} bulk prompts, {len(cases['html'])} html, "
          f"{len(cases['bad_files'])} bad files in {out} ({time.time() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
