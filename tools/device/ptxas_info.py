#!/usr/bin/env python3
"""Registers, spills and shared memory of each kernel entry point, as ptxas reports them,
through NVRTC's `-Xptxas -v` (no GPU and no nvcc needed).

Usage: tools/device/ptxas_info.py [--arch sm_90] [--nvrtc DIR] kernels/nvfp4/mma.cu ...
DIR is a CUDA install root or a pip wheel's nvidia/cu13 (default: .ci/cuda-wheels/nvidia/cu13,
which .ci/install-cuda-wheels fills, then $CUDA_HOME). Each file is compiled as the Rust
registries compile it: kernels/common/formats.cuh (and common/mma.cuh for the tensor-core
products) followed by the file.
"""
import argparse
import ctypes
import glob
import os
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def open_nvrtc(root):
    libs = sorted(glob.glob(os.path.join(root, "lib*", "libnvrtc.so*")))
    libs = [p for p in libs if "builtins" not in p]
    if not libs:
        raise SystemExit(f"no libnvrtc under {root}/lib*")
    lib_dir = os.path.dirname(libs[0])
    for b in glob.glob(os.path.join(lib_dir, "libnvrtc-builtins.so*")):
        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)  # NVRTC dlopens it by name
    return ctypes.CDLL(libs[0]), os.path.join(root, "include")


def report(lib, include, path, arch):
    text = pathlib.Path(path).read_text()
    # The tensor-core products also take the shared mma header, as their registry does.
    headers = ["formats.cuh"] + (["mma.cuh"] if re.search(r"EQ_MMA_ROWS|eq_mma_", text) else [])
    src = "".join((ROOT / "kernels/common" / h).read_text() + "\n" for h in headers) + text
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", b"-Xptxas", b"-v", f"-I{include}".encode()]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    text = log.value.decode()
    if rc != 0:
        raise SystemExit(f"{path}: NVRTC error {rc}\n{text}")
    entry = None
    for line in text.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            entry = m.group(1)
        elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            spills = f"stack {m.group(1):>3} B  spills {m.group(2)}/{m.group(3)} B"
        elif entry and (m := re.search(r"Used (\d+) registers", line)):
            smem = re.search(r"(\d+) bytes smem", line)
            print(f"{arch}  {entry:32} {m.group(1):>4} registers  {smem.group(1) if smem else 0:>6} B smem  {spills}")
            entry = None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvrtc", default=None)
    args = ap.parse_args()
    root = args.nvrtc or next((d for d in [str(ROOT / ".ci/cuda-wheels/nvidia/cu13"), os.environ.get("CUDA_HOME")]
                               if d and os.path.isdir(d)), None)
    if root is None:
        raise SystemExit("no NVRTC: run .ci/install-cuda-wheels or pass --nvrtc DIR")
    lib, include = open_nvrtc(root)
    for f in args.files:
        report(lib, include, f, args.arch)


if __name__ == "__main__":
    main()
