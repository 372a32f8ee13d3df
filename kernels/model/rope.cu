// The gated attention's inputs, as the CPU backend's attention::prepare computes them:
// the interleaved query/gate projection split into q and the gate, then the per-head
// zero-centred RMSNorm (q_norm on queries, k_norm on keys) and the partial NeoX rotary
// embedding at each row's position, in place on k.
// Prepended by kernels/common/formats.cuh.
//
// Layouts: qg [rows, heads, 2 · dim] (per head: dim query values, then dim gate values);
// q, gate [rows, heads, dim]; k [rows, kv_heads, dim]; positions [rows]; q_norm, k_norm
// [dim]; inv_freq [half] (the host's table, 1/θ^(2i/rotary_dim), so that both paths use
// the same frequencies). The first 2 · half channels of a head rotate: channel i < half
// pairs with i + half.
//
// Launch shape: grid (heads + kv_heads, rows), block EQ_ROPE_THREADS; a block per head row.

#define EQ_ROPE_THREADS 128
#define EQ_ROPE_MAX_DIM 256

extern "C" __global__ void __launch_bounds__(EQ_ROPE_THREADS)
    eq_attn_inputs_f32(const float* __restrict__ qg, float* __restrict__ k,
                       const eq_u32* __restrict__ positions, const float* __restrict__ q_norm,
                       const float* __restrict__ k_norm, const float* __restrict__ inv_freq,
                       float* __restrict__ q, float* __restrict__ gate, eq_u32 heads,
                       eq_u32 kv_heads, eq_u32 dim, eq_u32 half, float eps) {
    __shared__ float xs[EQ_ROPE_MAX_DIM];
    __shared__ float part[EQ_ROPE_THREADS / 32];
    const eq_u32 h = blockIdx.x;
    const eq_u32 t = blockIdx.y;
    const bool is_q = h < heads;
    const float* w = is_q ? q_norm : k_norm;
    float* dst = is_q ? q + ((eq_u64)t * heads + h) * dim
                      : k + ((eq_u64)t * kv_heads + (h - heads)) * dim;
    const float* src = is_q ? qg + ((eq_u64)t * heads + h) * 2u * dim : dst;
    if (is_q) {
        float* g = gate + ((eq_u64)t * heads + h) * dim;
        for (eq_u32 i = threadIdx.x; i < dim; i += blockDim.x) {
            g[i] = src[dim + i];
        }
    }
    float ss = 0.0f;
    for (eq_u32 i = threadIdx.x; i < dim; i += blockDim.x) {
        xs[i] = src[i];
        ss = fmaf(xs[i], xs[i], ss);
    }
    const float inv = 1.0f / sqrtf(eq_block_sum(ss, part) / (float)dim + eps);
    for (eq_u32 i = threadIdx.x; i < dim; i += blockDim.x) {
        xs[i] = xs[i] * (inv * (1.0f + w[i]));
    }
    __syncthreads();
    const float pos = (float)positions[t];
    for (eq_u32 i = threadIdx.x; i < dim; i += blockDim.x) {
        float o = xs[i];
        if (i < 2u * half) {
            const eq_u32 f = i < half ? i : i - half;
            const float angle = pos * inv_freq[f];
            const float c = cosf(angle);
            const float s = sinf(angle);
            o = i < half ? xs[i] * c - xs[i + half] * s : xs[i] * c + xs[i - half] * s;
        }
        dst[i] = o;  // k in place: every read of the row came from xs
    }
}
