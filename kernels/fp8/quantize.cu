// Per-tensor FP8 E4M3 quantization and dequantization (FP8 weights, FP8 KV cache), and
// the absolute-maximum reduction used to derive scales. Prepended by
// kernels/common/formats.cuh.
//
//   quantize:   q = e4m3_satfinite_rne(x / scale)   (IEEE f32 division, as the CPU)
//   dequantize: x = f32(e4m3(q)) · scale
//
// The encoder is formats::e4m3::encode in software (finite overflow and ±Inf saturate
// to ±448, NaN → 0x7F), so the bytes equal the CPU's.

// Thread-per-element grid-stride loops: these kernels are memory-bound and small
// (a KV-cache append is a few KiB), so simplicity wins over vector width.

extern "C" __global__ void eq_fp8_quantize_f32(const float* __restrict__ x,
                                               eq_u8* __restrict__ q, float scale,
                                               eq_u64 n) {
    for (eq_u64 i = (eq_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (eq_u64)gridDim.x * blockDim.x) {
        q[i] = (eq_u8)eq_e4m3_encode(x[i] / scale);
    }
}

extern "C" __global__ void eq_fp8_quantize_bf16(const eq_u16* __restrict__ x,
                                                eq_u8* __restrict__ q, float scale,
                                                eq_u64 n) {
    for (eq_u64 i = (eq_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (eq_u64)gridDim.x * blockDim.x) {
        q[i] = (eq_u8)eq_e4m3_encode(eq_bf16_to_f32(x[i]) / scale);
    }
}

extern "C" __global__ void eq_fp8_dequantize_f32(const eq_u8* __restrict__ q,
                                                 float* __restrict__ out, float scale,
                                                 eq_u64 n) {
    for (eq_u64 i = (eq_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (eq_u64)gridDim.x * blockDim.x) {
        out[i] = eq_e4m3_decode(q[i]) * scale;
    }
}

// max |x| as f32 bits, combined into *out_bits (initialised to 0) with atomicMax. For
// non-negative floats the unsigned order of the bits is the numeric order, and a NaN
// (0x7FC00000 after fabsf) sorts above +Inf, so a NaN input makes the result NaN.
extern "C" __global__ void eq_absmax_f32(const float* __restrict__ x,
                                         eq_u32* __restrict__ out_bits, eq_u64 n) {
    eq_u32 m = 0u;
    for (eq_u64 i = (eq_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (eq_u64)gridDim.x * blockDim.x) {
        m = max(m, __float_as_uint(fabsf(x[i])));
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
    }
    if ((threadIdx.x & 31u) == 0u) {
        atomicMax(out_bits, m);
    }
}
