// NVFP4 quantization with a given global scale (ModelOpt's `weight_scale_2`).
//
// Prepended by kernels/common/formats.cuh. One thread per 16-element block:
//   amax = max |x| over the block
//   s    = amax / (6 · g);  s == 0 → 1;  s = clamp(s, 2^−9, 448)   (ModelOpt 0.47)
//   sf   = e4m3_rne(s)                        → block-scale byte
//   q_i  = e2m1_rne(x_i / (f32(sf) · g))      → codes, even element in the low nibble
// Every operation is the one the CPU quantizer (nvfp4::quantize) performs, in the same
// order and precision (f32, IEEE division), so the bytes are identical.
//
// A non-finite input is reported through `bad_index` (atomicMin of its flat index; the
// caller initialises it to all ones) so the host can return the same error as the CPU.

extern "C" __global__ void eq_nvfp4_quantize_f32(
    const float* __restrict__ x,     // [rows, cols] row-major
    eq_u8* __restrict__ codes,       // [rows, cols/2]
    eq_u8* __restrict__ scales,      // [rows, cols/16]
    eq_u64* __restrict__ bad_index,  // one element, initialised to ~0
    float global_scale,              // g > 0, finite
    eq_u64 n_blocks)                 // rows · cols / 16
{
    eq_u64 b = (eq_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n_blocks) {
        return;
    }
    // 16 floats = 64 bytes; x comes from cudaMalloc (256-byte aligned) and every block
    // starts at a multiple of 64 bytes, so float4 loads are aligned.
    const float4* src = reinterpret_cast<const float4*>(x + b * EQ_NVFP4_BLOCK);
    float v[EQ_NVFP4_BLOCK];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float4 f = src[i];
        v[4 * i + 0] = f.x;
        v[4 * i + 1] = f.y;
        v[4 * i + 2] = f.z;
        v[4 * i + 3] = f.w;
    }

    float amax = 0.0f;
    bool finite = true;
#pragma unroll
    for (int i = 0; i < EQ_NVFP4_BLOCK; ++i) {
        float a = fabsf(v[i]);
        // Not `a < inf` alone: NaN compares false, which is what we want to catch.
        if (!(a <= 3.402823466e38f)) {
            if (finite) {
                atomicMin(bad_index, b * EQ_NVFP4_BLOCK + (eq_u64)i);
            }
            finite = false;
        }
        amax = fmaxf(amax, a);
    }

    float s = amax / (6.0f * global_scale);
    if (s == 0.0f) {
        s = 1.0f;
    }
    s = fminf(fmaxf(s, 0x1p-9f), 448.0f);
    eq_u32 sf = eq_e4m3_encode(s);
    scales[b] = (eq_u8)sf;

    float denom = eq_e4m3_decode(sf) * global_scale;
    eq_u32 lo = 0u, hi = 0u;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        lo |= eq_e2m1_encode(v[i] / denom) << (4 * i);
        hi |= eq_e2m1_encode(v[8 + i] / denom) << (4 * i);
    }
    // 8 bytes per block at a multiple of 8 bytes: aligned.
    reinterpret_cast<uint2*>(codes)[b] = make_uint2(lo, hi);
}
