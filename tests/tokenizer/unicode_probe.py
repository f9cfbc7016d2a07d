"""Character classes exactly as Hugging Face `tokenizers` sees them, found by probing the library.

The pre-tokenizer regex runs on Oniguruma (its \\p{L}, \\p{N}, \\p{M}, \\s); the added-token rules
(single_word, lstrip, rstrip) use Rust `regex` (\\w, \\s). Their Unicode versions differ from PCRE2's
and utf8proc's, so imp carries its own tables (src/text/unicode_tables.cpp, written by
gen_unicode_tables.py) and the parity test checks them against fresh probes.
"""
from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers

ALL_CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
# Where Unicode assigns characters (planes 0-3 and 14), plus a sample of the rest (unassigned planes
# 4-13, private-use planes 15-16): what the parity test re-probes, to stay fast.
CHECKED_CODE_POINTS = ([c for c in range(0x40000) if not 0xD800 <= c <= 0xDFFF] + list(range(0xE0000, 0xE1000))
                       + list(range(0x40000, 0xE0000, 61)) + list(range(0xE1000, 0x110000, 61)))


def onig_class(pattern, code_points=ALL_CODE_POINTS):
    """Code points one Oniguruma class pattern (e.g. r'\\p{L}') matches, via a removing Split."""
    text = "".join(chr(c) for c in code_points)
    kept = bytearray(len(code_points))
    split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    for _, (start, end) in split.pre_tokenize_str(text):  # offsets count characters
        kept[start:end] = b"\x01" * (end - start)
    return [c for c, k in zip(code_points, kept) if not k]


def _probe_tokenizer(**flags):
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.add_tokens([AddedToken("\x01T", normalized=False, **flags)])
    return tokenizer, tokenizer.token_to_id("\x01T")


def rust_word_class(code_points=ALL_CODE_POINTS):
    """Code points a single_word added token treats as word characters (Rust regex \\w)."""
    tokenizer, token_id = _probe_tokenizer(single_word=True)
    # Units of 4 characters: c, token, '.'; the token is extracted only when c is not a word character.
    text = "".join(chr(c) + "\x01T." for c in code_points)
    encoding = tokenizer.encode(text, add_special_tokens=False)
    extracted = {start // 4 for i, (start, _) in zip(encoding.ids, encoding.offsets) if i == token_id}
    return [c for k, c in enumerate(code_points) if k not in extracted]


def rust_space_class(code_points=ALL_CODE_POINTS):
    """Code points an lstrip added token absorbs (Rust regex \\s)."""
    tokenizer, token_id = _probe_tokenizer(lstrip=True)
    text = "".join("x" + chr(c) + "\x01T" for c in code_points)
    encoding = tokenizer.encode(text, add_special_tokens=False)
    return sorted(code_points[start // 4] for i, (start, end) in zip(encoding.ids, encoding.offsets)
                  if i == token_id and end - start == 3)


CLASSES = {
    "letter": lambda cps: onig_class(r"\p{L}", cps),
    "number": lambda cps: onig_class(r"\p{N}", cps),
    "mark": lambda cps: onig_class(r"\p{M}", cps),
    "regex_space": lambda cps: onig_class(r"\s", cps),
    "word": rust_word_class,
    "space": rust_space_class,
}


def all_classes(code_points=ALL_CODE_POINTS):
    return {name: probe(code_points) for name, probe in CLASSES.items()}


def nfc_inert_marks():
    """Marks that `tokenizers`' NFC treats as plain starters that decompose and compose with nothing.
    Its normalization data is older than utf8proc's, so for some (U+07FD and ~100 more with a nonzero
    combining class, the Dives Akuru vowel signs that compose into U+11938) the two disagree; imp
    cuts the text around these so utf8proc cannot reorder or compose across them."""
    from tokenizers import normalizers
    nfc, nfd = normalizers.NFC(), normalizers.NFD()
    cps = [c for c in ALL_CODE_POINTS if c != 0]
    decomposed = nfd.normalize_str("\0".join(chr(c) for c in cps)).split("\0")
    components, decomposable = set(), set()
    for c, d in zip(cps, decomposed):
        if d != chr(c):
            decomposable.add(c)
            components.update(ord(x) for x in d)
    marks = [m for m in onig_class(r"\p{M}") if m not in components and m not in decomposable]
    probes = [f"a{chr(m)}\u0301" for m in marks] + [f"a{chr(m)}\u0323" for m in marks]
    results = nfc.normalize_str("\0".join(probes)).split("\0")
    n = len(marks)
    return [m for i, m in enumerate(marks) if results[i] == probes[i] and results[n + i] == probes[n + i]]


def to_ranges(code_points):
    ranges = []
    for c in sorted(code_points):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ranges
