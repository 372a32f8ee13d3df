#!/usr/bin/env python3
"""The baseline of the NVFP4 sweep (group nvfp4-mlp-27b of the cuda_kernels bench,
benches/benches/cuda_kernels.rs): the same 16 Qwen3.6-27B MLP shapes as bf16 weights through
PyTorch's matmul (cuBLAS), 1 to 64 tokens, timed with CUDA events. Prints µs per pass over
the 16 matrices and the weight bytes read per second.

Usage (on a GPU machine with torch): python3 tools/device/torch_bf16_sweep.py
"""
import torch


def main():
    dev = torch.device("cuda")
    shapes = [(5120, 17408) if i % 3 == 2 else (17408, 5120) for i in range(16)]  # (rows, cols)
    mats = [torch.randn(r, c, device=dev, dtype=torch.bfloat16) * 0.02 for r, c in shapes]
    weight_bytes = sum(m.numel() * 2 for m in mats)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: bf16 weights {weight_bytes / 1e9:.2f} GB")
    print("tokens | cuBLAS bf16 µs  GB/s")
    for tokens in [1, 2, 4, 8, 16, 32, 64]:
        xs = {c: torch.randn(tokens, c, device=dev, dtype=torch.bfloat16) for c in (5120, 17408)}

        def one_pass():
            for m in mats:
                torch.matmul(xs[m.shape[1]], m.t())

        for _ in range(3):
            one_pass()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            one_pass()
        end.record()
        torch.cuda.synchronize()
        us = start.elapsed_time(end) * 1e3 / 10
        print(f"{tokens:6} | {us:14.0f} {weight_bytes / us / 1e3:6.0f}")


if __name__ == "__main__":
    main()
