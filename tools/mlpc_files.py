"""The files mlpc reads and writes, from Python with torch alone (no numpy, no safetensors package:
neither is sure to be on the GPU machine): safetensors weights and .npy arrays.

Formats as mlpc takes them (io/safetensors.h, io/npy.h): safetensors F32/F16/BF16, data tiled
in name order; .npy little-endian '<f4' / '<f2' / '<f8', C order. NumPy has no bfloat16, so bf16
arrays are written as '<f4' (exact: every bf16 value is an f32 value).
"""

import ctypes
import json
import struct

import torch

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
NPY_DTYPES = {"<f4": torch.float32, "<f2": torch.float16, "<f8": torch.float64}
NPY_MAGIC = b"\x93NUMPY"


def tensor_bytes(t):
    """The raw little-endian bytes of a CPU tensor (ctypes, so no numpy is needed)."""
    t = t.detach().to("cpu").contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def tensor_from_bytes(data, dtype, shape):
    if not data:
        return torch.zeros(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape).clone()


def write_safetensors(path, tensors):
    """tensors: {name: tensor}, each F32, F16 or BF16."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in SAFETENSORS_DTYPES:
            raise ValueError(f"tensor {name!r}: dtype {t.dtype} is not F32, F16 or BF16")
        data = tensor_bytes(t)
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def read_safetensors(path):
    """{name: tensor}; enough checking to fail clearly on a file that is not one of ours."""
    by_name = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: not a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        if e["dtype"] not in by_name or not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name!r}: bad dtype or offsets")
        out[name] = tensor_from_bytes(data[begin:end], by_name[e["dtype"]], e["shape"])
    return out


def write_npy(path, t):
    """An f32/f16 tensor as .npy (bf16 as '<f4', f64 as '<f8'), version 1.0, as NumPy writes."""
    t = t.detach().to("cpu")
    if t.dtype == torch.bfloat16:
        t = t.float()
    descr = {v: k for k, v in NPY_DTYPES.items()}.get(t.dtype)
    if descr is None:
        raise ValueError(f"{path}: dtype {t.dtype} has no .npy form here")
    dims = [str(d) for d in t.shape]
    shape = f"({dims[0]},)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (64 - (len(NPY_MAGIC) + 4 + len(header) + 1) % 64) + "\n"  # as NumPy pads
    with open(path, "wb") as f:
        f.write(NPY_MAGIC + b"\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(tensor_bytes(t))


def read_npy(path):
    """A tensor from a little-endian, C-order .npy file ('<f4', '<f2' or '<f8')."""
    import ast
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:6] != NPY_MAGIC:
        raise ValueError(f"{path}: not a .npy file")
    major = blob[6]
    n, start = (struct.unpack("<H", blob[8:10])[0], 10) if major == 1 else \
        (struct.unpack("<I", blob[8:12])[0], 12)
    header = ast.literal_eval(blob[start:start + n].decode("latin1"))
    if header["descr"] not in NPY_DTYPES or header["fortran_order"]:
        raise ValueError(f"{path}: dtype {header['descr']} (or Fortran order) not supported here")
    return tensor_from_bytes(blob[start + n:], NPY_DTYPES[header["descr"]], list(header["shape"]))
