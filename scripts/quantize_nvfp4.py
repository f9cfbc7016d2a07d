#!/usr/bin/env python3
"""Convert a BF16 Hugging Face qwen4_exp checkpoint into the NVIDIA ModelOpt NVFP4 layout.

Usage:
    scripts/quantize_nvfp4.py SRC_DIR DST_DIR [--table-fp8]

What it writes (see docs: shared/spec/qwen4_exp.md sections 2.3 and 2.4):

* Every routed-expert projection ``<prefix>layers.L.mlp.experts.E.{gate,up,down}_proj.weight`` (W, [N, K])
  becomes four tensors:
    - ``weight``         U8 [N, K/2]: E2M1 codes, element 2j in the low nibble, 2j+1 in the high nibble;
    - ``weight_scale``   F8_E4M3 [N, K/16]: one scale per 16 consecutive K elements, row-major, not swizzled;
    - ``weight_scale_2`` F32 []: amax(|W|) / (6 * 448);
    - ``input_scale``    F32 []: 1.0. There is no calibration data here. W4A16 engines ignore this value;
      a W4A4 engine would need a real activation amax.
  Dequantised: W = e2m1(code) * float(weight_scale) * weight_scale_2.
* With ``--table-fp8``, each PLE n-gram table (``...ple.ple_embedding.ngram_embedding.shard_k.weight``, or
  the unsharded ``...ngram_embedding.weight``) becomes F8_E4M3 with one BF16 scalar
  ``...ple.ple_embedding.ngram_embedding.weight_scale`` [1] = bf16(amax / 448) over that layer's whole
  table. Dequantised: bf16(float(fp8) * float(scale)). Like the released checkpoint, the table is not
  listed in hf_quant_config.json.
* Every other tensor is copied unchanged. Each tensor stays in the file it came from, so the shard layout
  (and the index, when there is one) is kept.
* ``hf_quant_config.json`` is written in ModelOpt's MIXED_PRECISION form, and ``config.json`` gets a
  ``quantization_config``.

``dequantize_folder(path)`` reads such a folder back and returns the exact dequantised FP32 weights; the
golden-fixture generator uses it to build the reference model.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

GROUP_SIZE = 16
E2M1_MAX = 6.0
E4M3_MAX = 448.0
# Magnitudes of the 3-bit E2M1 payload; bit 3 of a code is the sign.
E2M1_MAGNITUDES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float32)

EXPERT_WEIGHT_RE = re.compile(r"^(?P<layers>.*layers\.(?P<layer>\d+)\.mlp\.experts)\.(?P<expert>\d+)\."
                              r"(?P<proj>gate_proj|up_proj|down_proj)\.weight$")
TABLE_RE = re.compile(r"^(?P<table>.*\.ple\.ple_embedding\.ngram_embedding)\.(?:shard_(?P<shard>\d+)\.)?weight$")
TABLE_SCALE_SUFFIX = ".weight_scale"
INDEX_NAME = "model.safetensors.index.json"


# ----------------------------------------------------------------------------------------------------------
# NVFP4 (E2M1 codes + E4M3 block scales + FP32 global scale)
# ----------------------------------------------------------------------------------------------------------

def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """Round each fp32 value to the nearest E2M1 value and return its 4-bit code (uint8, 0..15).

    Values beyond +-6 saturate to +-6. On a tie the smaller magnitude wins (argmin returns the first
    minimum), which keeps the result deterministic.
    """
    magnitude = x.abs().clamp(max=E2M1_MAX)
    distance = (magnitude.unsqueeze(-1) - E2M1_MAGNITUDES).abs()
    code = distance.argmin(dim=-1).to(torch.uint8)
    sign = (x < 0) & (code != 0)  # -0 would be legal (code 8) but +0 is the canonical zero
    return code | (sign.to(torch.uint8) << 3)


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """Decode 4-bit E2M1 codes (uint8) to fp32."""
    magnitude = E2M1_MAGNITUDES[(codes & 0x7).long()]
    return torch.where((codes & 0x8) != 0, -magnitude, magnitude)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[N, K] codes -> [N, K/2] bytes; element 2j goes to the low nibble, 2j+1 to the high nibble."""
    return codes[:, 0::2] | (codes[:, 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """[N, K/2] bytes -> [N, K] codes (inverse of pack_nibbles)."""
    low, high = packed & 0x0F, packed >> 4
    return torch.stack([low, high], dim=-1).flatten(-2)


def quantize_nvfp4(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """Quantise one projection W [N, K] (K a multiple of 16) the way ModelOpt's NVFP4 export does."""
    n, k = weight.shape
    if k % GROUP_SIZE:
        raise ValueError(f"NVFP4 needs the input dimension to be a multiple of {GROUP_SIZE}, got {k}")
    w = weight.float()
    blocks = w.view(n, k // GROUP_SIZE, GROUP_SIZE)

    weight_scale_2 = w.abs().max() / (E2M1_MAX * E4M3_MAX)
    if weight_scale_2 > 0:
        # amax_block / 6 / weight_scale_2 <= 448 by construction; clamp guards fp32 rounding at the top.
        block_scale = (blocks.abs().amax(dim=-1) / E2M1_MAX / weight_scale_2).clamp(max=E4M3_MAX)
    else:
        block_scale = torch.zeros(n, k // GROUP_SIZE)
    weight_scale = block_scale.to(torch.float8_e4m3fn)

    # Divide by the scale that will actually be used at dequantisation (the rounded E4M3 value).
    dequant_scale = weight_scale.float() * weight_scale_2
    safe_scale = torch.where(dequant_scale > 0, dequant_scale, torch.ones_like(dequant_scale))
    scaled = torch.where(dequant_scale.unsqueeze(-1) > 0, blocks / safe_scale.unsqueeze(-1), torch.zeros_like(blocks))
    codes = e2m1_encode(scaled).view(n, k)

    return {
        "weight": pack_nibbles(codes).contiguous(),
        "weight_scale": weight_scale.contiguous(),
        "weight_scale_2": weight_scale_2.reshape(()).to(torch.float32),
        "input_scale": torch.tensor(1.0, dtype=torch.float32),
    }


def dequantize_nvfp4(weight: torch.Tensor, weight_scale: torch.Tensor, weight_scale_2: torch.Tensor) -> torch.Tensor:
    """Exact fp32 value of an NVFP4 projection: e2m1 * float(e4m3 scale) * weight_scale_2."""
    codes = unpack_nibbles(weight)
    n, k = codes.shape
    values = e2m1_decode(codes).view(n, k // GROUP_SIZE, GROUP_SIZE)
    # e2m1 * e4m3 is exact in fp32 (2 + 4 significant bits), so the only rounding is the final multiply by
    # weight_scale_2, as in a kernel that applies the global scale last.
    block = values * weight_scale.float().unsqueeze(-1)
    return (block * weight_scale_2.float()).view(n, k)


# ----------------------------------------------------------------------------------------------------------
# FP8 PLE table (one BF16 scale per table)
# ----------------------------------------------------------------------------------------------------------

def table_scale(amax: float) -> torch.Tensor:
    """BF16 [1] scale for a table whose largest magnitude is amax."""
    scale = torch.tensor([amax / E4M3_MAX], dtype=torch.float32).to(torch.bfloat16)
    return scale if scale.item() > 0 else torch.ones(1, dtype=torch.bfloat16)


def quantize_table_part(part: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """One shard of a table -> F8_E4M3 using the table's shared BF16 scale."""
    # bf16 rounding of the scale can make |x| / scale slightly exceed 448: clamp rather than overflow.
    scaled = (part.float() / scale.float()).clamp(-E4M3_MAX, E4M3_MAX)
    return scaled.to(torch.float8_e4m3fn)


def dequantize_table_part(part: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Exact value an engine sees: bf16(float(fp8) * float(bf16 scale)), returned as fp32."""
    return (part.float() * scale.float()).to(torch.bfloat16).float()


# ----------------------------------------------------------------------------------------------------------
# Folder I/O
# ----------------------------------------------------------------------------------------------------------

def list_weight_files(folder: Path) -> list[str]:
    """Safetensors files of a checkpoint folder, in index order when an index exists."""
    index = folder / INDEX_NAME
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return sorted(set(weight_map.values()))
    files = sorted(p.name for p in folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no .safetensors files in {folder}")
    return files


def read_file(path: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(path), framework="pt") as f:
        return {name: f.get_tensor(name) for name in f.keys()}


def table_amaxes(src: Path, files: list[str]) -> dict[str, float]:
    """amax over all shards of every PLE table; a table's shards may be spread over several files."""
    amax: dict[str, float] = {}
    for file_name in files:
        with safe_open(str(src / file_name), framework="pt") as f:
            for name in f.keys():
                match = TABLE_RE.match(name)
                if match:
                    table = match.group("table")
                    amax[table] = max(amax.get(table, 0.0), f.get_tensor(name).float().abs().max().item())
    return amax


def convert_tensors(tensors: dict[str, torch.Tensor], table_scales: dict[str, torch.Tensor] | None,
                    scales_written: set[str]) -> dict[str, torch.Tensor]:
    """Convert the tensors of one file. table_scales is None unless --table-fp8."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        expert = EXPERT_WEIGHT_RE.match(name)
        table = TABLE_RE.match(name) if table_scales is not None else None
        if expert:
            stem = name[: -len(".weight")]
            for suffix, value in quantize_nvfp4(tensor).items():
                out[f"{stem}.{suffix}"] = value
        elif table:
            table_name = table.group("table")
            scale = table_scales[table_name]
            out[name] = quantize_table_part(tensor, scale).contiguous()
            # The one scale of a table goes into the file that holds its first part seen.
            if table_name not in scales_written:
                out[table_name + TABLE_SCALE_SUFFIX] = scale.clone()
                scales_written.add(table_name)
        else:
            out[name] = tensor
    return out


def quantized_layer_names(names: list[str]) -> dict[str, dict]:
    """ModelOpt's quantized_layers map: one entry per experts module, in layer order."""
    layers = {}
    for name in names:
        match = EXPERT_WEIGHT_RE.match(name)
        if match:
            layers[match.group("layers")] = int(match.group("layer"))
    ordered = sorted(layers, key=lambda key: (layers[key], key))
    return {key: {"quant_algo": "NVFP4", "group_size": GROUP_SIZE} for key in ordered}


def write_configs(src: Path, dst: Path, quantized_layers: dict[str, dict]) -> None:
    producer = {"name": "modelopt", "version": "imp-scripts/quantize_nvfp4.py"}
    hf_quant_config = {
        "producer": producer,
        "quantization": {
            "quant_algo": "MIXED_PRECISION",
            "kv_cache_quant_algo": None,
            "quantized_layers": quantized_layers,
        },
    }
    (dst / "hf_quant_config.json").write_text(json.dumps(hf_quant_config, indent=2) + "\n")

    config = json.loads((src / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "group_size": GROUP_SIZE,
        "kv_cache_quant_algo": None,
        "producer": producer,
        # hf_quant_config.json lists exactly which modules are NVFP4 (the routed experts only).
        "quantized_layers": quantized_layers,
    }
    (dst / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def quantize_folder(src: Path, dst: Path, table_fp8: bool = False) -> None:
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise ValueError("SRC_DIR and DST_DIR must differ")
    dst.mkdir(parents=True, exist_ok=True)
    files = list_weight_files(src)

    table_scales = None
    if table_fp8:
        table_scales = {name: table_scale(amax) for name, amax in table_amaxes(src, files).items()}
        if not table_scales:
            print("warning: --table-fp8 given but no PLE n-gram table found", file=sys.stderr)

    weight_map: dict[str, str] = {}
    all_source_names: list[str] = []
    scales_written: set[str] = set()
    total_size = 0
    for file_name in files:
        tensors = read_file(src / file_name)
        all_source_names.extend(tensors)
        converted = convert_tensors(tensors, table_scales, scales_written)
        save_file(converted, str(dst / file_name), metadata={"format": "pt"})
        for name, tensor in converted.items():
            weight_map[name] = file_name
            total_size += tensor.numel() * tensor.element_size()

    if (src / INDEX_NAME).exists():
        index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
        (dst / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")

    # Everything else (generation_config.json, tokenizer files, ...) is copied, except what this script
    # rewrites and golden-fixture outputs, which describe the unquantised model.
    skipped = {INDEX_NAME, "config.json", "hf_quant_config.json", "golden.json", "reference_logits.f32"}
    for path in src.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name not in skipped:
            shutil.copy2(path, dst / path.name)
    write_configs(src, dst, quantized_layer_names(all_source_names))


# ----------------------------------------------------------------------------------------------------------
# Reading back
# ----------------------------------------------------------------------------------------------------------

def read_folder(folder: Path) -> dict[str, torch.Tensor]:
    folder = Path(folder)
    tensors: dict[str, torch.Tensor] = {}
    for file_name in list_weight_files(folder):
        tensors.update(read_file(folder / file_name))
    return tensors


def dequantize_folder(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of a (possibly) quantised folder, with NVFP4 experts and FP8 tables dequantised.

    Returns a state dict keyed like a BF16 checkpoint (``...proj.weight``, ``...shard_k.weight``): floating
    tensors as fp32 holding exactly the values an engine reconstructs, integer tensors unchanged. The
    auxiliary scale tensors are consumed and not returned.
    """
    stored = read_folder(folder)
    out: dict[str, torch.Tensor] = {}
    for name, tensor in stored.items():
        if name.endswith((".weight_scale", ".weight_scale_2", ".input_scale")):
            continue
        if EXPERT_WEIGHT_RE.match(name) and tensor.dtype == torch.uint8:
            stem = name[: -len(".weight")]
            out[name] = dequantize_nvfp4(tensor, stored[stem + ".weight_scale"], stored[stem + ".weight_scale_2"])
            continue
        table = TABLE_RE.match(name)
        if table and tensor.dtype == torch.float8_e4m3fn:
            out[name] = dequantize_table_part(tensor, stored[table.group("table") + TABLE_SCALE_SUFFIX])
            continue
        out[name] = tensor.float() if tensor.is_floating_point() else tensor
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="BF16 Hugging Face qwen4_exp folder")
    parser.add_argument("dst", type=Path, help="output folder (created)")
    parser.add_argument("--table-fp8", action="store_true",
                        help="also store the PLE n-gram tables as FP8 E4M3 with one BF16 scale per table")
    args = parser.parse_args(argv)
    quantize_folder(args.src, args.dst, table_fp8=args.table_fp8)
    print(f"wrote {args.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
