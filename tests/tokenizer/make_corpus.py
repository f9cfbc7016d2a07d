#!/usr/bin/env python3
"""Test set-up of the tokenizer parity suite: builds a text corpus, the tokenizer variants, and what
Hugging Face `tokenizers` makes of them, into --out (the build folder). The C++ test
(parity_test.cpp) then checks imp's tokenizer against these files.

Writes:
  corpus.json             [{"name", "section", "text"} or {"name", "section", "hex"} (raw bytes)]
  <variant>/tokenizer.json, tokenizer_config.json   for variants qwen3, qwen35, flags
  <variant>.expected.json per piece: ids, word ids, decode with and without special tokens; and
                          decodes of random id sequences
  unicode_classes.json    the character classes `tokenizers` uses (unicode_probe.py), as ranges
  nfc_cases.json          [input, NFC by tokenizers] for every code point NFC or NFD changes
"""
import argparse
import hashlib
import json
import multiprocessing
import pathlib
import random
import shutil
import sys

try:
    import tokenizers
except ImportError:
    sys.exit("make_corpus.py: Python package tokenizers is missing: pip install -r tests/requirements.txt")

import corpus_text
import unicode_probe

HERE = pathlib.Path(__file__).resolve().parent
PINNED = "0.23.3"
# Qwen3.5-family Split regex (spec qwen4_exp.md section 6): Qwen3's with \p{M} added.
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def write_json(path, value):
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")


def make_variants(source_dir, out):
    """qwen3 as shipped; qwen35 with the Qwen3.5 regex; flags with every added-token option in use."""
    base = json.loads((source_dir / "tokenizer.json").read_text(encoding="utf-8"))
    config = source_dir / "tokenizer_config.json"
    variants = {}

    qwen35 = json.loads(json.dumps(base))
    split = qwen35["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split", "unexpected Qwen3 pre_tokenizer layout"
    split["pattern"]["Regex"] = QWEN35_REGEX

    flags = json.loads(json.dumps(base))
    flags["model"]["ignore_merges"] = True
    options = {
        "<|endoftext|>": {"lstrip": True, "rstrip": True},
        "<|im_start|>": {"lstrip": True},
        "<|im_end|>": {"rstrip": True},
        "<think>": {"single_word": True},
        "</think>": {"normalized": True},
        "<tool_call>": {"single_word": True, "lstrip": True, "rstrip": True},
    }
    for token in flags["added_tokens"]:
        token.update(options.get(token["content"], {}))
    vocab = flags["model"]["vocab"]
    next_id = max(t["id"] for t in flags["added_tokens"]) + 1
    for content, opts in corpus_text.EXTRA_ADDED_TOKENS:
        token = {"content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
                 "special": False}
        token.update(opts)
        if content in vocab:
            token["id"] = vocab[content]
        else:
            token["id"] = next_id
            next_id += 1
        flags["added_tokens"].append(token)

    for name, data in (("qwen3", base), ("qwen35", qwen35), ("flags", flags)):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / "tokenizer.json", data)
        shutil.copy(config, folder / "tokenizer_config.json")
        variants[name] = folder
    return variants


def pieces_for(variant, pieces):
    """Indices of the pieces a variant is checked on: flags (which changes added tokens and turns
    ignore_merges on) skips most of the long real texts, which the other two cover."""
    if variant != "flags":
        return list(range(len(pieces)))
    return [i for i, p in enumerate(pieces)
            if p["section"] not in ("kjv", "c_headers") or p["index"] < 12]


def expected_for(args):
    name, folder, pieces, id_sequences = args
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    indices = pieces_for(name, pieces)
    texts = [p["text"] if "text" in p else bytes.fromhex(p["hex"]).decode("utf-8", "replace")
             for p in (pieces[i] for i in indices)]
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    results = []
    for index, text, encoding in zip(indices, texts, encodings):
        ids = encoding.ids
        decoded = tokenizer.decode(ids, skip_special_tokens=False)
        skipped = tokenizer.decode(ids, skip_special_tokens=True)
        results.append({
            "piece": index,
            "ids": ids,
            "words": encoding.word_ids,
            "decoded": None if decoded == text else decoded,
            "decoded_skip": None if skipped == decoded else skipped,
        })
    decodes = [{"ids": ids, "decoded": tokenizer.decode(ids, skip_special_tokens=False),
                "decoded_skip": tokenizer.decode(ids, skip_special_tokens=True)} for ids in id_sequences]
    return name, {"pieces": results, "random_ids": decodes, "vocab_size": tokenizer.get_vocab_size()}


def random_id_sequences(vocab_size, count=400):
    """Id sequences a model might emit: mostly single-byte and short tokens (so UTF-8 gets split and
    broken), some specials and some ids the tokenizer does not know."""
    rng = random.Random(1234)
    sequences = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            if r < 0.5:
                ids.append(rng.randint(0, 255))              # byte tokens
            elif r < 0.85:
                ids.append(rng.randint(0, vocab_size - 30))  # any model token
            elif r < 0.95:
                ids.append(rng.randint(vocab_size - 26, vocab_size - 1))  # added tokens
            else:
                ids.append(rng.randint(vocab_size, vocab_size + 1000))   # unknown
        sequences.append(ids)
    return sequences


def probe(name):
    return name, unicode_probe.to_ranges(unicode_probe.CLASSES[name](unicode_probe.CHECKED_CODE_POINTS))


def nfc_cases():
    from tokenizers import normalizers
    nfc, nfd = normalizers.NFC(), normalizers.NFD()
    cps = [c for c in unicode_probe.ALL_CODE_POINTS if c != 0]
    joined = "\0".join(chr(c) for c in cps)
    composed = nfc.normalize_str(joined).split("\0")
    decomposed = nfd.normalize_str(joined).split("\0")
    assert len(composed) == len(cps) and len(decomposed) == len(cps)
    inputs = []
    for c, a, d in zip(cps, composed, decomposed):
        if a != chr(c) or d != chr(c):
            inputs += [chr(c), d]
    # Combining marks around marks of other classes: catches canonical-ordering differences.
    marks = unicode_probe.onig_class(r"\p{M}")
    for m in marks:
        for other in ("\u0301", "\u0323", "\u05b0", "\u093c"):
            inputs += ["a" + other + chr(m), "a" + chr(m) + other, chr(m) + other]
    inputs = list(dict.fromkeys(inputs))
    outputs = nfc.normalize_str("\0".join(inputs)).split("\0")
    assert len(outputs) == len(inputs)
    return [[i, o] for i, o in zip(inputs, outputs)]


def inputs_digest(tokenizer_dir):
    """What the outputs depend on; when unchanged since the last run, the outputs are reused."""
    h = hashlib.sha256(tokenizers.__version__.encode())
    for path in sorted(HERE.glob("*.py")) + [tokenizer_dir / "tokenizer.json", tokenizer_dir / "tokenizer_config.json"]:
        h.update(path.name.encode() + path.read_bytes())
    for path in sorted(pathlib.Path("/usr/include").glob("*.h")) + [pathlib.Path("/usr/lib/bible.data")]:
        if path.exists():
            st = path.stat()
            h.update(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--tokenizer-dir", required=True, type=pathlib.Path)
    args = parser.parse_args()
    if tokenizers.__version__ != PINNED:
        sys.exit(f"make_corpus.py: tokenizers {tokenizers.__version__} installed, the tests pin {PINNED} "
                 "(pip install -r tests/requirements.txt)")
    if not (args.tokenizer_dir / "tokenizer.json").is_file():
        sys.exit(f"make_corpus.py: no tokenizer.json in {args.tokenizer_dir} (the shared/ data folder must sit "
                 "beside the repository as ../shared)")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    stamp = out / "inputs.sha256"
    digest = inputs_digest(args.tokenizer_dir)
    if stamp.exists() and stamp.read_text() == digest:
        print(f"tokenizer corpus in {out} is up to date")
        return
    stamp.unlink(missing_ok=True)

    variants = make_variants(args.tokenizer_dir, out)
    pieces = corpus_text.build_pieces()
    write_json(out / "corpus.json", pieces)
    vocab_size = json.loads((args.tokenizer_dir / "tokenizer.json").read_text())["added_tokens"][-1]["id"] + 1
    id_sequences = random_id_sequences(vocab_size)

    with multiprocessing.Pool(2) as pool:
        jobs = [(name, folder, pieces, id_sequences) for name, folder in variants.items()]
        expected = pool.map_async(expected_for, jobs)
        classes = pool.map_async(probe, list(unicode_probe.CLASSES))
        nfc = pool.apply_async(nfc_cases)
        for name, data in expected.get():
            write_json(out / f"{name}.expected.json", data)
        probed = dict(classes.get())
        probed["checked"] = unicode_probe.to_ranges(unicode_probe.CHECKED_CODE_POINTS)
        write_json(out / "unicode_classes.json", probed)
        write_json(out / "nfc_cases.json", nfc.get())

    total = sum(len(p["text"].encode()) if "text" in p else len(p["hex"]) // 2 for p in pieces)
    sections = {}
    for p in pieces:
        sections[p["section"]] = sections.get(p["section"], 0) + 1
    stamp.write_text(digest)
    print(f"tokenizer corpus: {len(pieces)} pieces, {total / 1e6:.2f} MB; sections {sections}")


if __name__ == "__main__":
    main()
