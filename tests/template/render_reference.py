#!/usr/bin/env python3
"""Reference prompts for imp's chat template parity tests.

Renders every conversation in a folder with every given model's chat template using Python jinja2,
configured the way Hugging Face transformers' apply_chat_template configures it (transformers 5.x,
utils/chat_template_utils.py): an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks,
the loopcontrols extension and a {% generation %} tag; tojson as json.dumps(ensure_ascii=False, ...)
without HTML escaping; raise_exception, strftime_now, dict() and a namespace() that refuses
underscore-prefixed names. Inputs are prepared as apply_chat_template prepares them: keys whose
value is None are dropped from each message, reasoning given as reasoning_content / thinking /
reasoning is copied to both "thinking" and "reasoning_content", the tokenizer's special tokens
(bos_token, eos_token, ...) are template variables that kwargs may override, documents is None.

Output: OUT/<template>/<conversation>.txt holds the exact prompt (UTF-8), or
OUT/<template>/<conversation>.error a JSON object {"kind", "message"} where kind is
"raise_exception" for the template's own raise_exception and the Python exception name otherwise.

--check-transformers also renders through the installed transformers (render_jinja_template, and
apply_chat_template where the folder holds a tokenizer.json) and fails on any difference: a check
that this script still matches Hugging Face. CI does not install transformers and skips it.
"""

import argparse
import datetime
import json
import sys
from pathlib import Path

try:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.utils
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit("render_reference.py: jinja2 is missing; install tests/requirements.txt (jinja2==3.1.6)")

STANDARD_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class GenerationTag(jinja2.ext.Extension):
    """HF's {% generation %}...{% endgeneration %}: the body renders unchanged (as a caller block)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def check_namespace_name(name):
    if isinstance(name, str) and name.startswith("_"):
        raise jinja2.exceptions.SecurityError(
            f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}."
        )


class CheckedNamespace(jinja2.utils.Namespace):
    def __init__(*args, **kwargs):  # same calling convention as jinja2's Namespace
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            check_namespace_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        check_namespace_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)


def make_environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = lambda *args, **kwargs: dict(*args, **kwargs)
    env.globals["namespace"] = CheckedNamespace
    return env


def token_text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def load_model(model_dir):
    """The templates by name and the special tokens, with transformers' precedence rules."""
    config_path = model_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    templates = {}
    if (model_dir / "chat_template.jinja").exists():
        templates["default"] = (model_dir / "chat_template.jinja").read_text(encoding="utf-8")
    extra = model_dir / "additional_chat_templates"
    if extra.is_dir():
        for path in sorted(extra.glob("*.jinja")):
            templates[path.stem] = path.read_text(encoding="utf-8")
    if not templates:
        entry = config.get("chat_template")
        if isinstance(entry, str):
            templates["default"] = entry
        elif isinstance(entry, list):
            templates = {item["name"]: item["template"] for item in entry}
    if not templates:
        sys.exit(f"render_reference.py: {model_dir} has no chat template")
    legacy = model_dir / "special_tokens_map.json"
    if "added_tokens_decoder" not in config and legacy.exists():
        config.update(json.loads(legacy.read_text(encoding="utf-8")))
    tokens = {}
    for name in STANDARD_TOKENS:
        if token_text(config.get(name)) is not None:
            tokens[name] = token_text(config[name])
    for name, value in config.items():
        if name.endswith("_token") and name not in STANDARD_TOKENS and token_text(value) is not None:
            tokens[name] = token_text(value)
    if isinstance(config.get("extra_special_tokens"), dict):
        for name, value in config["extra_special_tokens"].items():
            if token_text(value) is not None:
                tokens[name] = token_text(value)
    return templates, tokens


def prepare_messages(messages):
    prepared = []
    for message in messages:
        message = {key: value for key, value in message.items() if value is not None}
        reasoning = next((message[key] for key in REASONING_FIELDS if message.get(key) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        prepared.append(message)
    return prepared


def pick_template(templates, tools):
    if tools is not None and "tool_use" in templates:
        return templates["tool_use"]
    return templates["default"]


_compiled = {}


def compile_template(env, source):
    # Compiling takes jinja2 tens of milliseconds; HF caches compiled templates too.
    if source not in _compiled:
        _compiled[source] = env.from_string(source)
    return _compiled[source]


def render(env, templates, tokens, conversation):
    """Returns ("ok", prompt) or ("error", {"kind", "message"})."""
    tools = conversation.get("tools")
    source = pick_template(templates, tools)
    variables = {**tokens, **conversation.get("kwargs", {})}
    try:
        prompt = compile_template(env, source).render(
            messages=prepare_messages(conversation["messages"]),
            tools=tools,
            documents=None,
            add_generation_prompt=conversation.get("add_generation_prompt", False),
            **variables,
        )
        return "ok", prompt
    except Exception as error:  # every failure is a result to compare
        kind = "raise_exception" if type(error) is jinja2.exceptions.TemplateError else type(error).__name__
        return "error", {"kind": kind, "message": str(error)}


def check_transformers(model_dir, templates, tokens, conversation, expected):
    """Renders with the installed transformers; returns a difference description or None."""
    from transformers.utils.chat_template_utils import render_jinja_template

    tools = conversation.get("tools")
    kwargs = {**tokens, **conversation.get("kwargs", {})}
    messages = [{k: v for k, v in m.items() if v is not None} for m in conversation["messages"]]
    results = []
    try:
        rendered, _ = render_jinja_template(
            conversations=[messages],
            tools=tools,
            chat_template=pick_template(templates, tools),
            add_generation_prompt=conversation.get("add_generation_prompt", False),
            **kwargs,
        )
        results.append(("render_jinja_template", ("ok", rendered[0])))
    except Exception as error:
        results.append(("render_jinja_template", ("error", type(error).__name__)))
    if (model_dir / "tokenizer.json").exists():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        try:
            prompt = tokenizer.apply_chat_template(
                conversation["messages"],
                tools=tools,
                add_generation_prompt=conversation.get("add_generation_prompt", False),
                tokenize=False,
                **conversation.get("kwargs", {}),
            )
            results.append(("apply_chat_template", ("ok", prompt)))
        except Exception as error:
            results.append(("apply_chat_template", ("error", type(error).__name__)))
    for name, (status, value) in results:
        if status != expected[0] or (status == "ok" and value != expected[1]):
            return f"{name} gives {status} {value!r:.300}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--conversations", required=True, type=Path)
    parser.add_argument("--template", action="append", required=True, help="NAME=MODEL_DIR")
    parser.add_argument("--check-transformers", action="store_true")
    args = parser.parse_args()

    env = make_environment()
    conversations = sorted(args.conversations.glob("*.json"))
    if not conversations:
        sys.exit(f"render_reference.py: no conversations in {args.conversations}")
    failures = 0
    for spec in args.template:
        name, _, folder = spec.partition("=")
        model_dir = Path(folder)
        if not model_dir.is_dir():
            sys.exit(f"render_reference.py: template '{name}': model folder {model_dir} is missing")
        templates, tokens = load_model(model_dir)
        out_dir = args.out / name
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.iterdir():
            old.unlink()
        counts = {"ok": 0, "error": 0}
        for path in conversations:
            conversation = json.loads(path.read_text(encoding="utf-8"))
            status, value = render(env, templates, tokens, conversation)
            counts[status] += 1
            if status == "ok":
                (out_dir / f"{path.stem}.txt").write_bytes(value.encode("utf-8"))
            else:
                (out_dir / f"{path.stem}.error").write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
            if args.check_transformers:
                difference = check_transformers(model_dir, templates, tokens, conversation, (status, value))
                if difference:
                    failures += 1
                    print(f"MISMATCH {name}/{path.stem}: {difference}")
        print(f"{name}: {counts['ok']} prompts, {counts['error']} errors -> {out_dir}")
    if failures:
        sys.exit(f"render_reference.py: {failures} differences from transformers")


if __name__ == "__main__":
    main()
