// NVFP4 dequantization to f32. Prepended by kernels/common/formats.cuh.
//
// One thread per 16-element block, exactly as Nvfp4Tensor::dequantize_row:
//   scale = f32(e4m3(sf)) · g;   w_i = e2m1(q_i) · scale
// Both products are single IEEE f32 multiplications, so the result is bit-identical to
// the CPU (including −0.0 for code 8, and NaN for an E4M3 NaN scale byte).

extern "C" __global__ void eq_nvfp4_dequantize_f32(
    const eq_u8* __restrict__ codes,   // [rows, cols/2]
    const eq_u8* __restrict__ scales,  // [rows, cols/16]
    float* __restrict__ out,           // [rows, cols]
    float global_scale,
    eq_u64 n_blocks)                   // rows · cols / 16
{
    eq_u64 b = (eq_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n_blocks) {
        return;
    }
    float scale = eq_e4m3_decode(scales[b]) * global_scale;
    uint2 q = reinterpret_cast<const uint2*>(codes)[b];
    float4* dst = reinterpret_cast<float4*>(out + b * EQ_NVFP4_BLOCK);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        eq_u32 word = h == 0 ? q.x : q.y;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            eq_u32 w = word >> (16 * i);
            dst[2 * h + i] = make_float4(eq_e2m1_decode(w) * scale,
                                         eq_e2m1_decode(w >> 4) * scale,
                                         eq_e2m1_decode(w >> 8) * scale,
                                         eq_e2m1_decode(w >> 12) * scale);
        }
    }
}
