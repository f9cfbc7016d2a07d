#!/usr/bin/env python3
"""Make tests/fixtures/chat_tiny: a tiny random qwen4_exp model with a real-format tokenizer.

Usage:
    python3 scripts/make_chat_fixture.py [--out tests/fixtures/chat_tiny]
        [--qwen3-tokenizer /work/shared/data/qwen3-tokenizer] [--template-dir tests/fixtures/templates/flash_next]

Needs what scripts/make_golden.py needs (transformers >= 5.17, torch, safetensors) plus the HF `tokenizers`
package and jinja2. CPU only, deterministic. The model code (construction, perturbation, BF16 rounding,
reference, margins, saving) is imported from make_golden.py; this script only adds the tokenizer.

Steps:
  1. Derive a small byte-level BPE tokenizer from the Qwen3 tokenizer.json: same normalizer, pre-tokenizer,
     post-processor and decoder; the 256 byte-level tokens (Qwen3 ids 0..255, kept in that order), then the
     Qwen3 merges in rank order whose two parts are already kept, until there are REGULAR_TOKENS regular
     tokens (ids dense, in the order they were kept), then 9 added tokens (flags copied from Qwen3).
  2. Write tokenizer_config.json with the chat template: the Flash-Next-style template from --template-dir
     when that folder holds one, else the Qwen3 template.
  3. Build a tiny random qwen4_exp model (make_golden's ple_qsa shape) with vocab_size = tokenizer size and
     eos_token_id = <|endoftext|>; generation_config.json eos = [<|im_end|>, <|endoftext|>].
  4. Reference (HF FP32, eager, on the BF16-rounded weights): a plain-text prompt and a chat rendered by
     transformers' apply_chat_template, each with a 24-token greedy continuation (EOS ignored) and its
     decoded text; reference_logits.f32 for the plain-text prompt, in the golden-fixture layout.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_golden as mg  # noqa: E402  (sibling script; exits with a message when transformers is too old)

import tokenizers  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer, pre_tokenizers  # noqa: E402
from transformers import GenerationConfig, PreTrainedTokenizerFast  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "chat_tiny"
DEFAULT_QWEN3 = Path("/work/shared/data/qwen3-tokenizer")
DEFAULT_TEMPLATE_DIR = ROOT / "tests" / "fixtures" / "templates" / "flash_next"

NAME = "chat_tiny"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
                  "</tool_call>", "<tool_response>", "</tool_response>"]
VOCAB_SIZE = 512  # total, a multiple of 8
REGULAR_TOKENS = VOCAB_SIZE - len(SPECIAL_TOKENS)  # 503: 256 byte tokens + 247 merged tokens
MAX_NEW_TOKENS = 24
SEEDS = range(7000, 7008)
SIZE_BUDGET_BYTES = 1536 * 1024

PLAIN_PROMPT = ("The quick brown fox jumps over the lazy dog. In 2024, it ran 3.5 miles in 42 minutes! "
                "Isn't that fast?")
CHAT_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 12 + 30? Answer in one word."},
]

# The ple_qsa shape of make_golden (released model in miniature), with this tokenizer's vocabulary.
FIXTURE_CONFIG = {**next(f for f in mg.FIXTURES if f.name == "ple_qsa").config}


# ----------------------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------------------

def derive_tokenizer(qwen3: dict) -> tuple[dict, dict[str, int], int]:
    """tokenizer.json dict of the small tokenizer, the id of every added token, and the number of merges."""
    vocab, merges = qwen3["model"]["vocab"], qwen3["model"]["merges"]
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    byte_tokens = [token for token, index in by_id[:256]]
    if [index for _, index in by_id[:256]] != list(range(256)) or \
            set(byte_tokens) != set(pre_tokenizers.ByteLevel.alphabet()):
        raise RuntimeError("Qwen3 ids 0..255 are not the byte-level alphabet")

    kept = {token: index for index, token in enumerate(byte_tokens)}
    kept_merges = []
    for merge in merges:
        if len(kept) >= REGULAR_TOKENS:
            break
        left, right = merge if isinstance(merge, list) else merge.split(" ")
        if left in kept and right in kept and left + right in vocab:
            kept_merges.append(merge)
            kept.setdefault(left + right, len(kept))
    if len(kept) != REGULAR_TOKENS:
        raise RuntimeError(f"only {len(kept)} regular tokens reachable")

    source_added = {token["content"]: token for token in qwen3["added_tokens"]}
    added, special_ids = [], {}
    for offset, content in enumerate(SPECIAL_TOKENS):
        token = dict(source_added[content])  # same flags (special, normalized, lstrip, ...) as Qwen3
        token["id"] = REGULAR_TOKENS + offset
        added.append(token)
        special_ids[content] = token["id"]

    model = {**{key: value for key, value in qwen3["model"].items() if key not in ("vocab", "merges")},
             "vocab": kept, "merges": kept_merges}
    # Same keys in the same order as the source file (version, truncation, padding, added_tokens, ...).
    small = {key: qwen3[key] for key in qwen3}
    small["added_tokens"], small["model"] = added, model
    return small, special_ids, len(kept_merges)


def find_template(template_dir: Path, qwen3_dir: Path) -> tuple[str, str]:
    """(template text, where it came from): the Flash-Next-style template if present, else Qwen3's."""
    if template_dir.is_dir():
        candidates = [template_dir / "chat_template.jinja"] + sorted(template_dir.glob("*.jinja"))
        for path in candidates:
            if path.is_file():
                return path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        config = template_dir / "tokenizer_config.json"
        if config.is_file() and "chat_template" in json.loads(config.read_text(encoding="utf-8")):
            return json.loads(config.read_text(encoding="utf-8"))["chat_template"], str(config.relative_to(ROOT))
    config = json.loads((qwen3_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    return config["chat_template"], "Qwen3 tokenizer_config.json (/work/shared/data/qwen3-tokenizer)"


def tokenizer_config(qwen3_config: dict, added: list[dict], template: str) -> dict:
    decoder = {str(token["id"]): {key: token[key] for key in ("content", "lstrip", "normalized", "rstrip",
                                                               "single_word", "special")} for token in added}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": qwen3_config["bos_token"],  # null, as in Qwen3
        "chat_template": template,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": qwen3_config["pad_token"],  # <|endoftext|>
        "split_special_tokens": False,
        "tokenizer_class": qwen3_config["tokenizer_class"],
        "unk_token": None,
    }


def check_tokenizer(folder: Path, special_ids: dict[str, int]) -> None:
    """Loads with HF tokenizers and transformers; round trips English and a chat-formatted string."""
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    if tok.get_vocab_size(with_added_tokens=True) != VOCAB_SIZE:
        raise RuntimeError(f"tokenizer size {tok.get_vocab_size(with_added_tokens=True)} != {VOCAB_SIZE}")
    chat = ("<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there, 7 + 8?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nAdd.\n</think>\n\n15<|im_end|>\n<|endoftext|>")
    texts = [PLAIN_PROMPT, "Hello, world!  Tabs\tand\nnewlines; caf\u00e9 na\u0131ve \u65e5\u672c 3.14159", chat]
    fast = PreTrainedTokenizerFast.from_pretrained(folder)
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        if tok.decode(ids, skip_special_tokens=False) != text:
            raise RuntimeError(f"round trip failed: {text!r}")
        if fast(text, add_special_tokens=False)["input_ids"] != ids:
            raise RuntimeError("transformers and tokenizers disagree")
    chat_ids = tok.encode(chat, add_special_tokens=False).ids
    for content, index in special_ids.items():
        if content in chat and index not in chat_ids:
            raise RuntimeError(f"{content} is not matched as one token")
    if fast.eos_token_id != special_ids["<|im_end|>"] or fast.pad_token_id != special_ids["<|endoftext|>"] \
            or fast.bos_token_id is not None:
        raise RuntimeError("special-token ids in tokenizer_config.json do not load as expected")


# ----------------------------------------------------------------------------------------------------------
# Model and reference
# ----------------------------------------------------------------------------------------------------------

def fixture(eos_id: int, prompt_len: int) -> mg.Fixture:
    return mg.Fixture(
        name=NAME,
        description=(
            "Tiny random qwen4_exp text model with a real-format tokenizer (byte-level BPE derived from Qwen3: "
            f"{REGULAR_TOKENS} regular tokens + {len(SPECIAL_TOKENS)} added tokens = {VOCAB_SIZE}) for "
            "end-to-end text tests: tokenize -> chat template -> generate -> detokenize. Model shape as "
            "ple_qsa: 4 layers (attention with QSA at index 3), PLE on layer index 1, hc_count 4, 16 experts "
            f"top-4. eos_token_id (the PLE EOS) = {eos_id} = <|endoftext|>."),
        config={**FIXTURE_CONFIG, "vocab_size": VOCAB_SIZE, "eos_token_id": eos_id},
        prompt_len=prompt_len)


def decode_both(tok: Tokenizer, fast: PreTrainedTokenizerFast, ids: list[int]) -> tuple[str, str]:
    """HF decode with and without special tokens; tokenizers and transformers must agree."""
    texts = []
    for skip in (False, True):
        text = tok.decode(ids, skip_special_tokens=skip)
        if fast.decode(ids, skip_special_tokens=skip) != text:
            raise RuntimeError("transformers and tokenizers decode differently")
        texts.append(text)
    return texts[0], texts[1]


def use_pad_id(pad_id: int) -> None:
    """make_golden's greedy config pads with id 0; here 0 is '!', and generate() would mask every '!' of the
    prompt as padding. Pad with <|endoftext|> instead (never in the prompts; checked in main)."""
    make_config = mg.greedy_generation_config

    def greedy_generation_config() -> GenerationConfig:
        config = make_config()
        config.pad_token_id = pad_id
        return config

    mg.greedy_generation_config = greedy_generation_config


def choose_seed(spec: mg.Fixture, prompts: list[list[int]]):
    """make_golden's rule over both prompts: varied output first, then the widest worst-case margin."""
    best = None
    for seed in SEEDS:
        model = mg.build_model(spec, seed)
        references = [mg.compute_reference(model, prompt) for prompt in prompts]
        margins = [mg.measure_margins(model, reference) for reference in references]
        varied = all(len(set(r.tokens)) >= mg.MIN_DISTINCT_TOKENS for r in references)
        score = (varied, min(mg.worst_margin(m) for m in margins))
        print(f"  seed {seed}: varied {varied}, worst margin {score[1]:.3g}")
        if best is None or score > best[0]:
            best = (score, seed, model, references, margins)
    return best[1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--qwen3-tokenizer", type=Path, default=DEFAULT_QWEN3)
    parser.add_argument("--template-dir", type=Path, default=DEFAULT_TEMPLATE_DIR)
    args = parser.parse_args(argv)
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    mg.MAX_NEW_TOKENS = MAX_NEW_TOKENS  # make_golden's reference and golden.json read this module global
    started = time.time()

    folder = args.out
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)

    # 1-2. Tokenizer files.
    qwen3 = json.loads((args.qwen3_tokenizer / "tokenizer.json").read_text(encoding="utf-8"))
    qwen3_config = json.loads((args.qwen3_tokenizer / "tokenizer_config.json").read_text(encoding="utf-8"))
    small, special_ids, merge_count = derive_tokenizer(qwen3)
    (folder / "tokenizer.json").write_text(json.dumps(small, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    template, template_source = find_template(args.template_dir, args.qwen3_tokenizer)
    mg.write_json(folder / "tokenizer_config.json", tokenizer_config(qwen3_config, small["added_tokens"], template))
    check_tokenizer(folder, special_ids)

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    fast = PreTrainedTokenizerFast.from_pretrained(folder)
    plain_ids = tok.encode(PLAIN_PROMPT, add_special_tokens=False).ids
    rendered = fast.apply_chat_template(CHAT_MESSAGES, add_generation_prompt=True, tokenize=False)
    chat_ids = tok.encode(rendered, add_special_tokens=False).ids
    via_template = fast.apply_chat_template(CHAT_MESSAGES, add_generation_prompt=True, tokenize=True,
                                            return_dict=False)
    if list(via_template) != chat_ids:
        raise RuntimeError("apply_chat_template(tokenize=True) and encode(rendered) disagree")

    # 3. Model.
    eot, im_end = special_ids["<|endoftext|>"], special_ids["<|im_end|>"]
    if eot in plain_ids or eot in chat_ids:
        raise RuntimeError("a prompt contains <|endoftext|>, the pad id of the reference generation")
    use_pad_id(eot)
    spec = fixture(eot, len(plain_ids))
    seed, model, (plain_ref, chat_ref), (plain_margins, chat_margins) = choose_seed(spec, [plain_ids, chat_ids])
    mg.save_model_folder(model, spec, folder, seed)
    GenerationConfig(eos_token_id=[im_end, eot]).save_pretrained(folder)
    reloaded = mg.load_with_transformers(folder)
    mg.check_reload(reloaded, plain_ref)
    mg.check_reload(reloaded, chat_ref)

    # 4. References.
    plain_text, plain_text_skip = decode_both(tok, fast, plain_ref.tokens)
    chat_text, chat_text_skip = decode_both(tok, fast, chat_ref.tokens)
    extra = {
        "seed": seed,
        "layout": "text",
        "prompt_text": PLAIN_PROMPT,
        "continuation_text": plain_text,
        "continuation_text_skip_special": plain_text_skip,
        "chat": {
            "messages": CHAT_MESSAGES,
            "add_generation_prompt": True,
            "template_source": template_source,
            "rendered": rendered,
            "prompt": chat_ids,
            "greedy_tokens": chat_ref.tokens,
            "continuation_text": chat_text,
            "continuation_text_skip_special": chat_text_skip,
            "margins": chat_margins,
        },
        "tokenizer": {
            "vocab_size": VOCAB_SIZE,
            "regular_tokens": REGULAR_TOKENS,
            "merges": merge_count,
            "special_token_ids": special_ids,
            "model_eos_token_id": eot,
            "generation_eos_token_ids": [im_end, eot],
            "tokenizers_version": tokenizers.__version__,
        },
    }
    mg.write_golden(folder, NAME, spec.description, plain_ref, VOCAB_SIZE, plain_margins, extra)
    write_readme(folder, extra, template_source, len(plain_ids), len(chat_ids))

    total = mg.folder_bytes(folder)
    for path in sorted(folder.iterdir()):
        print(f"  {path.name}: {path.stat().st_size} bytes, sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]}")
    print(f"{NAME}: seed {seed}, {total} bytes ({total / 2**20:.2f} MiB), {time.time() - started:.1f} s")
    print(f"  plain continuation: {plain_text!r}\n  chat continuation: {chat_text!r}")
    for margins in (plain_margins, chat_margins):
        if mg.worst_margin(margins) < mg.MIN_MARGIN:
            print(f"warning: a router/QSA/greedy margin is below {mg.MIN_MARGIN}")
    if total > SIZE_BUDGET_BYTES:
        print(f"warning: the fixture exceeds {SIZE_BUDGET_BYTES} bytes")
    return 0


def write_readme(folder: Path, extra: dict, template_source: str, plain_len: int, chat_len: int) -> None:
    ids = extra["tokenizer"]["special_token_ids"]
    id_list = ", ".join(f"`{content}` {index}" for content, index in ids.items())
    readme = f"""# chat_tiny fixture (generated; do not edit by hand)

Made by `python3 scripts/make_chat_fixture.py` (default `--out tests/fixtures/chat_tiny`), with
transformers {mg.transformers.__version__}, torch {torch.__version__}, tokenizers {tokenizers.__version__}
(CPU, one thread). Re-running that command rewrites this folder; the output is deterministic for a given
transformers/torch build (see tests/fixtures/golden/README.md for the caveats).

A tiny random `qwen4_exp` model whose folder also holds a real-format tokenizer with a matching vocabulary,
so the whole text path (tokenize -> chat template -> generate -> detokenize) can be tested in CI.

## Tokenizer

`tokenizer.json` is derived from the Qwen3 tokenizer (/work/shared/data/qwen3-tokenizer): same NFC
normalizer, same `Split` regex + `ByteLevel` pre-tokenizer, same `ByteLevel` post-processor and decoder.
Vocabulary: the 256 byte-level tokens (ids 0..255, Qwen3's order), then the first
{extra["tokenizer"]["merges"]} Qwen3 merges in rank order whose two parts were already kept (ids 256..{REGULAR_TOKENS - 1} in that
order), {REGULAR_TOKENS} regular tokens; then the added tokens {id_list}, with Qwen3's flags (`<think>`,
`</think>`, `<tool_call>`, ... have `special: false`, as in Qwen3). vocab_size = {VOCAB_SIZE}.

`tokenizer_config.json`: eos `<|im_end|>`, pad `<|endoftext|>`, bos null, `add_bos_token` false, and the
chat template from: {template_source}.

## Model

{json.loads((folder / "golden.json").read_text())["description"]}
`config.json` `eos_token_id` = {extra["tokenizer"]["model_eos_token_id"]} (`<|endoftext|>`, the EOS the PLE
n-grams reset on); `generation_config.json` `eos_token_id` = {extra["tokenizer"]["generation_eos_token_ids"]}
(`<|im_end|>`, `<|endoftext|>`). Weights are BF16 (made, perturbed and rounded by make_golden.py's code).

## References (`golden.json`, `reference_logits.f32`)

HF FP32, eager attention, eager experts, on the BF16-rounded weights; greedy decoding of
{MAX_NEW_TOKENS} tokens with EOS ignored (the continuation may contain special tokens; decoding must go on).

- Plain text: `prompt_text` -> `prompt` ({plain_len} ids, HF `tokenizers`, no special tokens added) ->
  `greedy_tokens` -> `continuation_text` (HF decode, `skip_special_tokens=False`;
  `continuation_text_skip_special` with `True`). `prompt`, `greedy_tokens`, `max_tokens`, `vocab_size`,
  `logits_file`, `logits_rows` have the golden-fixture meaning, so the golden harness runs on this folder:
  `reference_logits.f32` is `logits_rows` x `vocab_size` float32 (prompt rows, then one row per generated
  token except the last).
- Chat: `chat.messages` (system + user) rendered with transformers' `apply_chat_template(...,
  add_generation_prompt=True)` on `PreTrainedTokenizerFast.from_pretrained(<this folder>)` -> `chat.rendered`
  -> `chat.prompt` ({chat_len} ids) -> `chat.greedy_tokens` -> `chat.continuation_text`. No logits file.

The model is random, so continuations are arbitrary tokens: lone non-ASCII byte tokens give invalid
UTF-8, which HF's ByteLevel decoder turns into U+FFFD (lossy decoding), and control bytes appear as is.
The decoded continuations, as JSON strings:

- plain: `{json.dumps(extra["continuation_text"])}`
- chat: `{json.dumps(extra["chat"]["continuation_text"])}`
"""
    (folder / "README.md").write_text(readme, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
