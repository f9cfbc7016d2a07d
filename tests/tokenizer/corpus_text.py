"""The parity corpus: real text (the King James Bible from the Debian package bible-kjv, C headers from
/usr/include) and constructed pieces aimed at every corner of the tokenizer. Deterministic for a given
machine (the headers present may differ between machines; the expectations are computed alongside)."""
import pathlib
import random
import shutil
import subprocess
import sys

# Added tokens appended to the "flags" variant: (content, options).
EXTRA_ADDED_TOKENS = [
    ("hello", {"single_word": True, "normalized": False}),           # also a model token: keeps its id
    ("cafe\u0301", {"normalized": True}),                              # matched as NFC "café"
    ("\u212b", {"normalized": False, "special": True}),               # ANGSTROM SIGN, only raw
    ("\u2126", {"normalized": True}),                                  # OHM SIGN, NFC is U+03A9
    ("<mask>", {"lstrip": True, "rstrip": True, "single_word": True, "special": True}),
    ("x y", {"normalized": False}),                                    # not byte-level text
    (" lead", {"normalized": False}),                                  # starts with a space
]

ADDED_CONTENTS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
                  "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                  "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
ADDED_CONTENTS += [content for content, _ in EXTRA_ADDED_TOKENS]


def kjv_text():
    bible = shutil.which("bible")
    if bible is None:
        sys.exit("make_corpus.py: the `bible` program (Debian packages bible-kjv, bible-kjv-text) is missing: "
                 "run scripts/install_deps.sh")
    result = subprocess.run([bible, "-f", "Genesis1:1-Revelation22:21"], stdin=subprocess.DEVNULL,
                            capture_output=True, check=True)
    text = result.stdout.decode("utf-8")
    if len(text) < 4_000_000:
        sys.exit(f"make_corpus.py: `bible` printed only {len(text)} characters")
    return text


def kjv_pieces(text, verses=200):
    """Pieces of 200 verses (one verse a line, "Ge1:1 In the beginning ...")."""
    lines = text.splitlines(keepends=True)
    return ["".join(lines[i:i + verses]) for i in range(0, len(lines), verses)]


def header_pieces(limit=900_000):
    pieces, total = [], 0
    for path in sorted(pathlib.Path("/usr/include").glob("*.h")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        pieces.append((path.name, text))
        total += len(text)
        if total > limit:
            break
    if total < 200_000:
        sys.exit("make_corpus.py: too few C headers in /usr/include")
    return pieces


def numbers(rng):
    out = []
    for digits in range(1, 40):
        out.append(str(rng.randrange(10 ** (digits - 1), 10 ** digits)))
    out += ["3.14159", "-0.5e-10", "1,234,567.89", "1.234.567,89", "0x7fffffff", "0b1010", "1e100", "10^9+7",
            "2024-05-17", "12:30:59.999", "+1 (555) 010-9999", "192.168.0.1", "v1.2.3-rc.4", "$1,000", "€50",
            "100%", "½ ¼ ¾", "²³¹⁰", "①②③", "Ⅻ Ⅸ ⅰⅱ", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９",
            "𝟎𝟏𝟐", "๑๒๓", "１２３ａｂｃ", "3rd 21st 1990s", "a1b2c3", "x²+y²=z²", "1/2/3", "99.9th"]
    return " ".join(out) + "\n" + "\n".join(str(rng.randrange(0, 10 ** rng.randint(1, 25))) for _ in range(300))


def whitespace():
    parts = []
    for n in (1, 2, 3, 4, 7, 8, 15, 16, 31, 64, 100, 257):
        for after in ("word", "!", "\n", "1", "", "\t", "\u00e9"):
            parts.append(" " * n + after)
            parts.append("\t" * n + after)
    parts += ["line one\r\nline two\r\n\r\nline four\r\n", "a\r\rb", "\r\n \r\n\t\r\n", "trailing   \n",
              "x\u00a0y\u00a0\u00a0z", "ideographic\u3000space\u3000\u3000", "ls\u2028ps\u2029nel\u0085vt\x0bff\x0c",
              "zw\u200bsp\u200c\u200dj", "mongolian\u180evs", "en\u2002em\u2003thin\u2009hair\u200a",
              "\n" * 50, "\r\n" * 40, " \n" * 30, "  \n  \n\n   \t\n", "\t\tindent\n\t\t\tdeeper\n"]
    return parts


CJK_PARAGRAPHS = [
    "今天天气很好，我们一起去公园散步吧。公园里有很多人在跑步、打太极拳，还有小朋友在放风筝。",
    "机器学习模型需要大量的数据进行训练，而分词器决定了文本如何被切分成词元。",
    "東京の春は桜がとても綺麗です。週末には多くの人がお花見に出かけます。カタカナとひらがなと漢字。",
    "このプログラムはテキストをトークンに分割します。「こんにちは、世界！」と表示されます。",
    "서울의 가을은 하늘이 높고 맑습니다. 우리는 주말마다 한강 공원에서 자전거를 탑니다.",
    "한국어 문장은 띄어쓰기를 사용하지만 중국어와 일본어는 그렇지 않습니다.",
    "中文、日本語、한국어が混ざった文章：ABC和123也在里面。",
    "【注意】请勿在此处吸烟！（谢谢合作）《红楼梦》第一回……",
]


def cjk(rng):
    parts = list(CJK_PARAGRAPHS)
    pools = [(0x4E00, 0x9FFF), (0x3040, 0x309F), (0x30A0, 0x30FF), (0xAC00, 0xD7A3), (0x3400, 0x4DBF),
             (0x20000, 0x2A6DF), (0xFF01, 0xFF5E)]
    punct = "。，、！？「」『』（）：；…"
    for _ in range(200):
        lo, hi = rng.choice(pools)
        s = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 30)))
        parts.append(s + rng.choice(punct) + rng.choice(["", " ", "\n", "abc", "42"]))
    return parts


def emoji():
    return ["I ❤️ tokenizers 😀😃😄😁", "👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag, 🏴‍☠️",
            "🇯🇵🇺🇸🇩🇪🇫🇷 flags", "1️⃣2️⃣#️⃣*️⃣ keycaps", "☺︎ vs ☺️ (VS15/VS16)", "🧑‍🤝‍🧑 🫶 🫠 🪿 🥹",
            "emoji😀inside😀words", "😀" * 40, "🏴󠁧󠁢󠁳󠁣󠁴󠁿 tag sequence", "❤‍🔥 ❤️‍🩹", "text ✔ ✗ ★ ☆ ♠ ♣ ♥ ♦"]


def combining():
    return ["e\u0301cole cafe\u0301 nai\u0308ve A\u030angstro\u0308m", "a\u0323\u0301 a\u0301\u0323 (reordered)",
            "o\u0302\u0323 o\u0323\u0302 ê\u0323 ệ", "\u1100\u1161\u11a8 \u1112\u1161\u11ab (Hangul jamo)",
            "\u212b \u2126 \u212a (singletons)", "\u0958 \u0915\u093c (composition exclusion)",
            "\u0301 leading mark", " \u0301 mark after space", "1\u0301 mark after digit", "!\u0301?\u0308",
            "<|im_end|>\u0301 mark after a special token", "\U00011935\U00011930 \U00011938 Dives Akuru",
            "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u0334\u0335\u031c\u0330\u0354L\u0357G\u0311\u0352O",
            "Việt Nam: Tiếng Việt có nhiều dấu thanh: à á ả ã ạ ằ ắ ẳ ẵ ặ",
            "ελληνικά: ά έ ή ί ό ύ ώ ΐ ΰ ᾶ ῆ", "עִבְרִית וְעַרְבִית: العَرَبِيَّة", "हिन्दी क़ ख़ ग़", "தமிழ் ை ொ ோ",
            "ไทย ภาษาไทยไม่มีการเว้นวรรค", "မြန်မာ", "བོད་ཡིག", "a\u200db\u200cc", "ﬁ ﬂ ﬀ ﬃ (ligatures, NFC keeps)"]


def special_tokens(rng):
    parts = []
    for t in ADDED_CONTENTS:
        for left, right in (("", ""), ("text", "text"), (" ", " "), ("  ", "  "), ("\n", "\n"), ("é", "_"),
                            ("word ", ""), ("", " word"), ("Ⓐ", "①"), ("\t", "\t\t"), ("<", ">")):
            parts.append(left + t + right)
    parts.append("".join(ADDED_CONTENTS))
    parts.append(" ".join(ADDED_CONTENTS))
    parts += ["<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
              "<|im_start|>assistant\n<think>\nLet me think.\n</think>\n\nHello<|im_end|>\n",
              "<|im_start", "<|im_start|", "<<|im_end|>>", "abc<think>def", "<|im_end|><|im_start|>",
              "<|im_end|> lead", "<|endoftext|>  <|endoftext|>", "hello hello_ _hello héllo hello1 Ⓐhello hello①",
              "café cafe\u0301 CAFÉ", "\u212b \u00c5 A\u030a", "\u2126 \u03a9", "x y x  y xy", "<mask><mask> <mask>",
              "a<mask>b a <mask> b", " lead lead  lead", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
              "<tool_call>x<tool_call> <tool_call> ", "\u3000<|im_start|>\u3000", "\u00a0<|endoftext|>\u2003"]
    for _ in range(150):
        pieces = [rng.choice(ADDED_CONTENTS + ["", " ", "  ", "\n", "x", "hello", "é", "\t", "1"]) for _ in range(6)]
        parts.append("".join(pieces))
    return parts


def adversarial(rng):
    parts = ["a" * 5000, "s" * 3000, "ssssss", " " * 5000, "\n" * 3000, "!" * 2000, "1" * 1000, "ab" * 1500,
             "\u00e9" * 1000, "\u4e00" * 2000, "😀" * 500, "\t" * 1000, "-" * 800 + ">", "=" * 300]
    for c in ("s", "t", "re", "ve", "m", "ll", "d"):
        for v in {c, c.upper(), c.capitalize(), c[::-1].capitalize()[::-1]}:
            parts.append(f"it'{v} x'{v}y '{v} ''{v} '{v}'")
    parts += ["don't I'M we'RE they'Ve she'LL he'D it'S 'tis", "'ſ 'ſt (long s folds to s)", "’s ‘t ʼll",
              "''' '''' '", "O'Neill rock'n'roll", "helloмирπ世界αβγ", "Pаypаl (Cyrillic а)", "ABCdefΓΔΕ",
              "\ufdd0\ufdef\ufffe\uffff\U0001fffe\U0010ffff noncharacters", "\ue000\uf8ff\U000f0000\U0010fffd private use",
              "\ufffd replacement \ufffd\ufffd", "".join(chr(c) for c in range(1, 32)) + "\x7f",
              "".join(chr(c) for c in range(0x80, 0xa0)), "\ufeffBOM at start", "mid\ufeffBOM",
              "https://example.com/path?q=1&r=two#frag user@example.org C:\\Windows\\System32 /usr/lib/x86_64",
              "{\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}", "# Title\n\n- item **bold** `code`\n",
              "𝐀𝐁𝐂 𝑎𝑏𝑐 𝕏𝕐", "ǅ ǈ ǋ (titlecase)", "İstanbul ıi ß ẞ ﬅ", "a\u0000b\u0000"]
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    parts.append("".join(rng.choice(letters) for _ in range(600)))
    for _ in range(100):
        n = rng.randint(1, 60)
        pool = letters + "0123456789 '\n\t.,!?-_()[]{}<>|\\/\"@#$%^&*~`" + "éüñçøåæœßʼ’“”—–…" + "中文日本語한국어"
        parts.append("".join(rng.choice(pool) for _ in range(n)))
    return parts


def unicode_sweep():
    """Every code point of planes 0-3 and 14 (and a sample of the rest) once, between separators that
    expose how the regex classifies it."""
    seps = ["", " ", "a", "1", "\n", "'s", "", "!", "  "]
    parts, chunk = [], []
    code_points = [c for c in range(0x40000) if not 0xD800 <= c <= 0xDFFF] + list(range(0xE0000, 0xE1000))
    code_points += list(range(0x40000, 0x110000, 97))
    for i, c in enumerate(code_points):
        chunk.append(chr(c) + seps[i % len(seps)])
        if len(chunk) == 512:
            parts.append("".join(chunk))
            chunk = []
    if chunk:
        parts.append("".join(chunk))
    return parts


def invalid_utf8():
    """Raw bytes, for imp; `tokenizers` gets them decoded with errors="replace"."""
    cases = [b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98",
             b"\xf0\x9f\x98a", b"\xed\xa0\x80 surrogate", b"\xc0\xaf overlong", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80",
             b"\xf5\x80", b"ok \xf0\x9f\x98\x80 \xf0\x9f \x98\x80", b"<|im_end|>\xff<|im_start|>", b"caf\x65\xcc",
             b"\x80" * 10, b"Hello \xc3\xa9\xc3 world", b"\xe4\xb8\xad\xe6\x96"]
    return [c.hex() for c in cases]


def build_pieces():
    rng = random.Random(20240517)
    pieces = []

    def add(section, texts):
        for i, text in enumerate(texts):
            pieces.append({"name": f"{section}[{i}]", "section": section, "index": i, "text": text})

    for i, text in enumerate(kjv_pieces(kjv_text())):
        pieces.append({"name": f"kjv[{i}]", "section": "kjv", "index": i, "text": text})
    for i, (name, text) in enumerate(header_pieces()):
        pieces.append({"name": f"c_headers[{i}]/{name}", "section": "c_headers", "index": i, "text": text})
    add("numbers", [numbers(rng)])
    add("whitespace", whitespace())
    add("cjk", cjk(rng))
    add("emoji", emoji())
    add("combining", combining())
    add("special_tokens", special_tokens(rng))
    add("adversarial", adversarial(rng))
    add("unicode_sweep", unicode_sweep())
    for i, hex_bytes in enumerate(invalid_utf8()):
        pieces.append({"name": f"invalid_utf8[{i}]", "section": "invalid_utf8", "index": i, "hex": hex_bytes,
                       "replaced": bytes.fromhex(hex_bytes).decode("utf-8", "replace")})
    return pieces
