// Gated DeltaNet decode step: the single-token gated delta rule of every one-row span and
// value head, then the gated RMSNorm, as the CPU backend computes it
// (crates/edge-model/src/cpu/delta_rule.rs::recurrent and cpu/gdn.rs::recurrence).
// Prepended by kernels/common/formats.cuh; uses eq_block_sum-style reductions of its own.
//
// Per span s (one token) and value head j (key head kh = j / (hv / hk)), with the state
// S = states[slot_of[s], j] ([dk, dv], row-major):
//   β = sigmoid(b[s, j]);  g = neg_a[j] · softplus(a[s, j] + dt_bias[j]);  d = e^g
//   (0 where e^g < 2^-60, the CPU's weight_exp);
//   a_c = Σ_i k_i S[i, c];  b_c = Σ_i q_i S[i, c];  kq = Σ_i k_i q_i;
//   δ_c = β (v_c − d·a_c);  o_c = d·b_c + kq·δ_c;  S[i, c] ← flush(d·S[i, c] + k_i δ_c)
//   (flush: |x| < 2^-60 → 0);
//   out[s, j, :] = o · rsqrt(mean(o²) + eps) · w · silu(z[s, j, :]).
//
// Layouts: q, k [spans, hk, dk]; v, z, out [spans, hv, dv]; b, a [spans, hv];
// states [slots, hv, dk, dv]. dk, dv ≤ EQ_GDN_MAX_DIM.
// Launch shape: block EQ_GDN_THREADS, grid (hv, spans). Thread t owns state columns
// t, t + EQ_GDN_THREADS, ... (coalesced rows).

#define EQ_GDN_THREADS 128
#define EQ_GDN_MAX_DIM 256
#define EQ_GDN_NEGLIGIBLE 8.673617e-19f
#define EQ_GDN_LN_NEGLIGIBLE -41.58883f

__device__ __forceinline__ float eq_gdn_softplus(float x) {
    return x > 20.0f ? x : log1pf(expf(x));
}

extern "C" __global__ void __launch_bounds__(EQ_GDN_THREADS)
    eq_gdn_decode_f32(float* __restrict__ states, const eq_u32* __restrict__ slot_of,
                      const float* __restrict__ q, const float* __restrict__ k,
                      const float* __restrict__ v, const float* __restrict__ b,
                      const float* __restrict__ a, const float* __restrict__ z,
                      const float* __restrict__ neg_a, const float* __restrict__ dt_bias,
                      const float* __restrict__ norm_w, float* __restrict__ out, eq_u32 hk,
                      eq_u32 hv, eq_u32 dk, eq_u32 dv, float eps) {
    __shared__ float ks[EQ_GDN_MAX_DIM];
    __shared__ float qs[EQ_GDN_MAX_DIM];
    __shared__ float os[EQ_GDN_MAX_DIM];
    __shared__ float part[EQ_GDN_THREADS / 32];

    const eq_u32 j = blockIdx.x;
    const eq_u32 s = blockIdx.y;
    const eq_u32 kh = j / (hv / hk);
    const float* kr = k + ((eq_u64)s * hk + kh) * dk;
    const float* qr = q + ((eq_u64)s * hk + kh) * dk;
    for (eq_u32 i = threadIdx.x; i < dk; i += blockDim.x) {
        ks[i] = kr[i];
        qs[i] = qr[i];
    }
    __syncthreads();

    float kq = 0.0f;  // every thread sums in the same order: one value for the block
    for (eq_u32 i = 0; i < dk; ++i) {
        kq = fmaf(ks[i], qs[i], kq);
    }
    const float beta = 1.0f / (1.0f + expf(-b[(eq_u64)s * hv + j]));
    const float g = neg_a[j] * eq_gdn_softplus(a[(eq_u64)s * hv + j] + dt_bias[j]);
    const float decay = g < EQ_GDN_LN_NEGLIGIBLE ? 0.0f : expf(g);

    float* S = states + ((eq_u64)slot_of[s] * hv + j) * dk * dv;
    const float* vr = v + ((eq_u64)s * hv + j) * dv;
    float ss = 0.0f;
    for (eq_u32 c = threadIdx.x; c < dv; c += blockDim.x) {
        float ac = 0.0f;
        float bc = 0.0f;
        for (eq_u32 i = 0; i < dk; ++i) {
            const float sv = S[(eq_u64)i * dv + c];
            ac = fmaf(ks[i], sv, ac);
            bc = fmaf(qs[i], sv, bc);
        }
        const float delta = beta * (vr[c] - decay * ac);
        const float oc = decay * bc + kq * delta;
        for (eq_u32 i = 0; i < dk; ++i) {
            float* p = S + (eq_u64)i * dv + c;
            const float nv = fmaf(ks[i], delta, decay * *p);
            *p = fabsf(nv) < EQ_GDN_NEGLIGIBLE ? 0.0f : nv;
        }
        os[c] = oc;
        ss = fmaf(oc, oc, ss);
    }

    // Gated RMSNorm over the head's dv outputs.
    ss = eq_warp_sum(ss);
    if ((threadIdx.x & 31u) == 0u) {
        part[threadIdx.x >> 5] = ss;
    }
    __syncthreads();
    float total = 0.0f;
    for (eq_u32 w = 0; w < blockDim.x / 32u; ++w) {
        total += part[w];
    }
    const float inv = 1.0f / sqrtf(total / (float)dv + eps);
    const float* zr = z + ((eq_u64)s * hv + j) * dv;
    float* orow = out + ((eq_u64)s * hv + j) * dv;
    for (eq_u32 c = threadIdx.x; c < dv; c += blockDim.x) {
        const float zc = zr[c];
        orow[c] = os[c] * inv * norm_w[c] * (zc / (1.0f + expf(-zc)));
    }
}
