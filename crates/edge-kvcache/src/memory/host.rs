//! Host (CPU) memory: every page and slot is its own boxed slice, so the pool grows and
//! shrinks page by page without moving what is already stored.
//!
//! A page of one attention layer is laid out head-major, `[kv_heads, block_size,
//! head_dim]`, for keys and for values: one KV head's rows in a page are contiguous,
//! so attention walks them sequentially.

use super::CacheMemory;
use crate::{
    AttentionLayerSpec, BlockId, CacheSpec, KvCacheError, KvDType, RecurrentLayerSpec, Result,
    SlotId,
};
use edge_quant::formats::e4m3;

/// Pages of one element type; `None` where a page has no storage.
#[derive(Debug)]
struct Pages<T> {
    pages: Vec<Option<Box<[T]>>>,
    len: usize,
}

impl<T: Copy + Default> Pages<T> {
    fn new(len: usize) -> Self {
        Pages {
            pages: Vec::new(),
            len,
        }
    }

    fn materialize(&mut self, page: usize) {
        if self.pages.len() <= page {
            self.pages.resize_with(page + 1, || None);
        }
        if self.pages[page].is_none() {
            self.pages[page] = Some(vec![T::default(); self.len].into_boxed_slice());
        }
    }

    fn drop_page(&mut self, page: usize) {
        if let Some(p) = self.pages.get_mut(page) {
            *p = None;
        }
    }

    fn holds(&self, page: usize) -> bool {
        self.pages.get(page).is_some_and(Option::is_some)
    }

    fn get(&self, page: usize) -> &[T] {
        self.pages[page]
            .as_deref()
            .expect("a page the cache handed out has storage")
    }

    fn get_mut(&mut self, page: usize) -> &mut [T] {
        self.pages[page]
            .as_deref_mut()
            .expect("a page the cache handed out has storage")
    }

    /// Copies `len` elements at `from.1` of page `from.0` to `to.1` of page `to.0`.
    fn copy_run(&mut self, from: (usize, usize), to: (usize, usize), len: usize) {
        if from.0 == to.0 {
            self.get_mut(to.0).copy_within(from.1..from.1 + len, to.1);
            return;
        }
        let mut dst = self.pages[to.0]
            .take()
            .expect("a page the cache handed out has storage");
        dst[to.1..to.1 + len].copy_from_slice(&self.get(from.0)[from.1..][..len]);
        self.pages[to.0] = Some(dst);
    }

    fn copy_prefix(&mut self, from: usize, to: usize, heads: usize, run: usize, used: usize) {
        // Take the destination out for the copy, so both pages are borrowed at once.
        let mut dst = self.pages[to]
            .take()
            .expect("a page the cache handed out has storage");
        let src = self.get(from);
        for h in 0..heads {
            let r = h * run..h * run + used;
            dst[r.clone()].copy_from_slice(&src[r]);
        }
        self.pages[to] = Some(dst);
    }
}

/// The pages of one arena (keys or values) in their element type.
#[derive(Debug)]
enum Arena {
    F32(Pages<f32>),
    Bf16(Pages<u16>),
    Fp8(Pages<u8>),
}

macro_rules! each_arena {
    ($arena:expr, $p:ident => $e:expr) => {
        match $arena {
            Arena::F32($p) => $e,
            Arena::Bf16($p) => $e,
            Arena::Fp8($p) => $e,
        }
    };
}

impl Arena {
    fn new(dtype: KvDType, len: usize) -> Self {
        match dtype {
            KvDType::F32 => Arena::F32(Pages::new(len)),
            KvDType::Bf16 => Arena::Bf16(Pages::new(len)),
            KvDType::Fp8E4M3 => Arena::Fp8(Pages::new(len)),
        }
    }

    fn run(&self, page: usize, range: std::ops::Range<usize>) -> KvRun<'_> {
        match self {
            Arena::F32(p) => KvRun::F32(&p.get(page)[range]),
            Arena::Bf16(p) => KvRun::Bf16(&p.get(page)[range]),
            Arena::Fp8(p) => KvRun::Fp8(&p.get(page)[range]),
        }
    }

    /// Encodes `x` into `page[at..at + x.len()]` (`scale` divides FP8 inputs).
    fn write(&mut self, page: usize, at: usize, x: &[f32], scale: f32) {
        match self {
            Arena::F32(p) => p.get_mut(page)[at..][..x.len()].copy_from_slice(x),
            Arena::Bf16(p) => {
                for (o, &v) in p.get_mut(page)[at..][..x.len()].iter_mut().zip(x) {
                    *o = half::bf16::from_f32(v).to_bits();
                }
            }
            Arena::Fp8(p) => {
                // Divide (not multiply by 1/scale, which rounds once more), as
                // `edge_quant::fp8::kv::quantize_kv` and ModelOpt's quantizer do.
                for (o, &v) in p.get_mut(page)[at..][..x.len()].iter_mut().zip(x) {
                    *o = e4m3::encode(v / scale);
                }
            }
        }
    }
}

/// A run of consecutive cached rows of one KV head, in the page's element type.
#[derive(Clone, Copy, Debug)]
pub enum KvRun<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// bf16 bit patterns.
    Bf16(&'a [u16]),
    /// FP8 E4M3 codes (multiply by the layer's scale).
    Fp8(&'a [u8]),
}

/// Decodes a run into f32 (`scale` multiplies FP8 codes; others ignore it).
pub fn decode_run(run: KvRun<'_>, scale: f32, out: &mut [f32]) {
    match run {
        KvRun::F32(x) => out.copy_from_slice(x),
        KvRun::Bf16(x) => {
            for (o, &b) in out.iter_mut().zip(x) {
                *o = f32::from_bits(u32::from(b) << 16);
            }
        }
        KvRun::Fp8(x) => {
            for (o, &b) in out.iter_mut().zip(x) {
                *o = e4m3::DECODE[b as usize] * scale;
            }
        }
    }
}

/// One attention layer's pages in host memory.
#[derive(Debug)]
pub struct HostKv {
    spec: AttentionLayerSpec,
    block_size: usize,
    dtype: KvDType,
    /// Some stored value was NaN (sticky: pages are reused).
    saw_nan: bool,
    keys: Arena,
    values: Arena,
}

impl HostKv {
    fn new(spec: AttentionLayerSpec, block_size: usize, dtype: KvDType) -> Self {
        let len = spec.kv_heads * block_size * spec.head_dim;
        HostKv {
            spec,
            block_size,
            dtype,
            saw_nan: false,
            keys: Arena::new(dtype, len),
            values: Arena::new(dtype, len),
        }
    }

    /// The layer's shape and FP8 scales.
    pub fn spec(&self) -> &AttentionLayerSpec {
        &self.spec
    }

    /// Tokens per page.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// The pages' element type.
    pub fn dtype(&self) -> KvDType {
        self.dtype
    }

    fn head_range(&self, head: usize, rows: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let d = self.spec.head_dim;
        let base = head * self.block_size * d;
        base + rows.start * d..base + rows.end * d
    }

    /// Keys of `rows` (within the page) of KV head `head` in `page`:
    /// `[rows.len(), head_dim]`.
    pub fn keys(&self, page: BlockId, head: usize, rows: std::ops::Range<usize>) -> KvRun<'_> {
        self.keys.run(page.index(), self.head_range(head, rows))
    }

    /// Values of `rows` of KV head `head` in `page`.
    pub fn values(&self, page: BlockId, head: usize, rows: std::ops::Range<usize>) -> KvRun<'_> {
        self.values.run(page.index(), self.head_range(head, rows))
    }

    /// Whether a NaN was ever stored in this layer's pages. Fast kernels that decode
    /// FP8 rows without a NaN check (code 0x7F is NaN in E4M3, a number in the f16
    /// they read it through) use this to fall back to an exact decode.
    pub fn may_hold_nan(&self) -> bool {
        self.saw_nan
    }

    /// An error unless `row` of `page` is storage of this layer.
    fn check_row(&self, page: BlockId, row: usize) -> Result<()> {
        if row >= self.block_size {
            return Err(KvCacheError::Access(format!(
                "row {row} of a page of {} rows",
                self.block_size
            )));
        }
        if !each_arena!(&self.keys, p => p.holds(page.index())) {
            return Err(KvCacheError::Access(format!(
                "page {} has no storage (the cache did not hand it out)",
                page.index()
            )));
        }
        Ok(())
    }

    /// Stores one token's keys and values (`[kv_heads · head_dim]` each, head-major)
    /// at row `row` of `page`, encoded in the page's element type. A page without
    /// storage, a row past the page or rows of another width are a
    /// [`KvCacheError::Access`] error, and nothing is written.
    pub fn write_row(&mut self, page: BlockId, row: usize, k: &[f32], v: &[f32]) -> Result<()> {
        self.check_row(page, row)?;
        let width = self.spec.kv_heads * self.spec.head_dim;
        if k.len() != width || v.len() != width {
            return Err(KvCacheError::Access(format!(
                "key and value rows of {} and {} values for a layer {width} wide",
                k.len(),
                v.len()
            )));
        }
        self.saw_nan |= k.iter().chain(v).any(|x| x.is_nan());
        let d = self.spec.head_dim;
        for h in 0..self.spec.kv_heads {
            let at = self.head_range(h, row..row + 1).start;
            let (ks, vs) = (&k[h * d..][..d], &v[h * d..][..d]);
            self.keys.write(page.index(), at, ks, self.spec.k_scale);
            self.values.write(page.index(), at, vs, self.spec.v_scale);
        }
        Ok(())
    }
}

impl HostKv {
    /// Copies one cached row (every KV head's key and value, in the stored element
    /// type: no re-encoding) from `(page, row)` `from` to `to`. Tree speculation's
    /// commit moves accepted rows to their final places with it. Either place outside
    /// the layer's storage is a [`KvCacheError::Access`] error, and nothing is copied.
    pub fn copy_row(&mut self, from: (BlockId, usize), to: (BlockId, usize)) -> Result<()> {
        self.check_row(from.0, from.1)?;
        self.check_row(to.0, to.1)?;
        let d = self.spec.head_dim;
        for h in 0..self.spec.kv_heads {
            let a = self.head_range(h, from.1..from.1 + 1).start;
            let b = self.head_range(h, to.1..to.1 + 1).start;
            let (src, dst) = ((from.0.index(), a), (to.0.index(), b));
            each_arena!(&mut self.keys, p => p.copy_run(src, dst, d));
            each_arena!(&mut self.values, p => p.copy_run(src, dst, d));
        }
        Ok(())
    }
}

/// One recurrent layer's slots in host memory.
#[derive(Debug)]
pub struct HostRecurrent {
    spec: RecurrentLayerSpec,
    conv: Vec<Option<Box<[f32]>>>,
    state: Vec<Option<Box<[f32]>>>,
}

impl HostRecurrent {
    /// The layer's sizes.
    pub fn spec(&self) -> &RecurrentLayerSpec {
        &self.spec
    }

    /// The conv window and recurrent state of each of `slots` (distinct), in order. A
    /// slot asked for twice, or one without storage (the cache did not hand it out),
    /// is a [`KvCacheError::Access`] error.
    pub fn slots_mut(&mut self, slots: &[SlotId]) -> Result<Vec<(&mut [f32], &mut [f32])>> {
        let mut conv: Vec<Option<&mut Box<[f32]>>> =
            self.conv.iter_mut().map(Option::as_mut).collect();
        let mut state: Vec<Option<&mut Box<[f32]>>> =
            self.state.iter_mut().map(Option::as_mut).collect();
        slots
            .iter()
            .map(|s| {
                let taken = (conv.get_mut(s.index()).and_then(Option::take))
                    .zip(state.get_mut(s.index()).and_then(Option::take));
                let (c, r) = taken.ok_or_else(|| {
                    KvCacheError::Access(format!(
                        "state slot {} asked for twice or without storage",
                        s.index()
                    ))
                })?;
                Ok((&mut c[..], &mut r[..]))
            })
            .collect()
    }
}

/// One recurrent layer's saved conv window and state.
type SavedLayer = (Box<[f32]>, Box<[f32]>);

/// A saved copy of one slot: per recurrent layer, the conv window and the state.
#[derive(Clone, Debug, PartialEq)]
pub struct HostState {
    layers: Vec<SavedLayer>,
}

impl HostState {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|(c, s)| (c.len() + s.len()) * 4)
            .sum()
    }

    /// Layer `layer`'s conv window and state.
    pub fn layer(&self, layer: usize) -> (&[f32], &[f32]) {
        let (c, s) = &self.layers[layer];
        (c, s)
    }
}

/// Pages and slots in host memory.
#[derive(Debug)]
pub struct HostMemory {
    spec: CacheSpec,
    kv: Vec<HostKv>,
    recurrent: Vec<HostRecurrent>,
}

impl HostMemory {
    /// Empty host storage for `spec` (nothing allocated yet); a spec that does not
    /// describe a usable cache is a [`crate::KvCacheError::Config`] error.
    pub fn new(spec: &CacheSpec) -> Result<Self> {
        spec.validate()?;
        Ok(HostMemory {
            spec: spec.clone(),
            kv: (spec.attention.iter())
                .map(|a| HostKv::new(*a, spec.block_size, spec.kv_dtype))
                .collect(),
            recurrent: (spec.recurrent.iter())
                .map(|r| HostRecurrent {
                    spec: *r,
                    conv: Vec::new(),
                    state: Vec::new(),
                })
                .collect(),
        })
    }
}

impl CacheMemory for HostMemory {
    type Kv = HostKv;
    type Recurrent = HostRecurrent;
    type State = HostState;

    fn spec(&self) -> &CacheSpec {
        &self.spec
    }

    fn materialize_page(&mut self, page: BlockId) -> Result<()> {
        for kv in &mut self.kv {
            each_arena!(&mut kv.keys, p => p.materialize(page.index()));
            each_arena!(&mut kv.values, p => p.materialize(page.index()));
        }
        Ok(())
    }

    fn drop_page(&mut self, page: BlockId) {
        for kv in &mut self.kv {
            each_arena!(&mut kv.keys, p => p.drop_page(page.index()));
            each_arena!(&mut kv.values, p => p.drop_page(page.index()));
        }
    }

    fn materialize_slot(&mut self, slot: SlotId) -> Result<()> {
        let i = slot.index();
        for r in &mut self.recurrent {
            if r.conv.len() <= i {
                r.conv.resize_with(i + 1, || None);
                r.state.resize_with(i + 1, || None);
            }
            r.conv[i] = Some(vec![0.0; r.spec.conv].into_boxed_slice());
            r.state[i] = Some(vec![0.0; r.spec.state].into_boxed_slice());
        }
        Ok(())
    }

    fn drop_slot(&mut self, slot: SlotId) {
        for r in &mut self.recurrent {
            if let Some(c) = r.conv.get_mut(slot.index()) {
                *c = None;
                r.state[slot.index()] = None;
            }
        }
    }

    fn copy_rows(&mut self, from: BlockId, to: BlockId, rows: usize) -> Result<()> {
        let block = self.spec.block_size;
        for kv in &mut self.kv {
            let (heads, d) = (kv.spec.kv_heads, kv.spec.head_dim);
            let (f, t) = (from.index(), to.index());
            each_arena!(&mut kv.keys, p => p.copy_prefix(f, t, heads, block * d, rows * d));
            each_arena!(&mut kv.values, p => p.copy_prefix(f, t, heads, block * d, rows * d));
        }
        Ok(())
    }

    fn clear_state(&mut self, slot: SlotId) -> Result<()> {
        for r in &mut self.recurrent {
            for part in [&mut r.conv, &mut r.state] {
                if let Some(Some(x)) = part.get_mut(slot.index()) {
                    x.fill(0.0);
                }
            }
        }
        Ok(())
    }

    fn save_state(&self, slot: SlotId) -> Result<HostState> {
        let i = slot.index();
        let get = |v: &Vec<Option<Box<[f32]>>>| v[i].clone().expect("a live slot");
        Ok(HostState {
            layers: (self.recurrent.iter())
                .map(|r| (get(&r.conv), get(&r.state)))
                .collect(),
        })
    }

    fn load_state(&mut self, slot: SlotId, state: &HostState) -> Result<()> {
        let i = slot.index();
        for (r, (c, s)) in self.recurrent.iter_mut().zip(&state.layers) {
            r.conv[i].as_mut().expect("a live slot").copy_from_slice(c);
            r.state[i].as_mut().expect("a live slot").copy_from_slice(s);
        }
        Ok(())
    }

    fn kv(&self, layer: usize) -> &HostKv {
        &self.kv[layer]
    }

    fn kv_mut(&mut self, layer: usize) -> &mut HostKv {
        &mut self.kv[layer]
    }

    fn recurrent_mut(&mut self, layer: usize) -> &mut HostRecurrent {
        &mut self.recurrent[layer]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dtype: KvDType) -> CacheSpec {
        CacheSpec {
            block_size: 4,
            kv_dtype: dtype,
            attention: vec![AttentionLayerSpec {
                kv_heads: 2,
                head_dim: 3,
                k_scale: 0.5,
                v_scale: 2.0,
            }],
            recurrent: vec![RecurrentLayerSpec { conv: 2, state: 3 }],
        }
    }

    fn decoded(run: KvRun<'_>, scale: f32) -> Vec<f32> {
        let n = match run {
            KvRun::F32(x) => x.len(),
            KvRun::Bf16(x) => x.len(),
            KvRun::Fp8(x) => x.len(),
        };
        let mut out = vec![0.0; n];
        decode_run(run, scale, &mut out);
        out
    }

    #[test]
    fn rows_round_trip_in_every_dtype_and_copy_on_write_copies_the_prefix() {
        let k = [1.0, -2.5, 3.0, 0.125, 448.0, -7.0];
        let v = [0.5, 1.5, -1.0, 2.0, 3.0, 1e-3];
        for dtype in [KvDType::F32, KvDType::Bf16, KvDType::Fp8E4M3] {
            let mut m = HostMemory::new(&spec(dtype)).unwrap();
            let (p, q) = (BlockId::new(0), BlockId::new(3));
            m.materialize_page(p).unwrap();
            m.materialize_page(q).unwrap();
            m.kv_mut(0).write_row(p, 1, &k, &v).unwrap();
            m.kv_mut(0).write_row(p, 2, &v, &k).unwrap();
            let kv = m.kv(0);
            for h in 0..2 {
                let got = decoded(kv.keys(p, h, 1..2), 0.5);
                let want: Vec<f32> = k[h * 3..][..3]
                    .iter()
                    .map(|&x| match dtype {
                        KvDType::F32 => x,
                        KvDType::Bf16 => half::bf16::from_f32(x).to_f32(),
                        KvDType::Fp8E4M3 => e4m3::decode(e4m3::encode(x / 0.5)) * 0.5,
                    })
                    .collect();
                assert_eq!(got, want, "{dtype:?} head {h}");
            }
            // Copy-on-write of the first two rows: row 1 comes along, row 2 does not.
            m.copy_rows(p, q, 2).unwrap();
            let kv = m.kv(0);
            assert_eq!(
                decoded(kv.values(q, 1, 0..2), 2.0),
                decoded(kv.values(p, 1, 0..2), 2.0)
            );
            assert!(decoded(kv.keys(q, 0, 2..3), 0.5).iter().all(|&x| x == 0.0));
        }
    }

    #[test]
    fn slots_save_load_and_clear() {
        let mut m = HostMemory::new(&spec(KvDType::F32)).unwrap();
        let (a, b) = (SlotId::new(0), SlotId::new(2));
        m.materialize_slot(a).unwrap();
        m.materialize_slot(b).unwrap();
        {
            let mut parts = m.recurrent_mut(0).slots_mut(&[b, a]).unwrap();
            parts[0].0.copy_from_slice(&[1.0, 2.0]);
            parts[1].1.copy_from_slice(&[3.0, 4.0, 5.0]);
        }
        let saved = m.save_state(b).unwrap();
        assert_eq!(saved.layer(0), (&[1.0, 2.0][..], &[0.0; 3][..]));
        assert_eq!(saved.bytes(), 20);
        m.load_state(a, &saved).unwrap();
        assert_eq!(m.save_state(a).unwrap(), saved);
        m.clear_state(b).unwrap();
        assert_eq!(m.save_state(b).unwrap().layer(0).0, &[0.0, 0.0]);
    }

    #[test]
    fn pages_rows_and_slots_the_cache_never_handed_out_are_errors() {
        let mut m = HostMemory::new(&spec(KvDType::Fp8E4M3)).unwrap();
        let (p, unknown) = (BlockId::new(0), BlockId::new(5));
        m.materialize_page(p).unwrap();
        let row = [1.0; 6];
        let access = |r: Result<()>| matches!(r, Err(KvCacheError::Access(_)));
        assert!(access(m.kv_mut(0).write_row(unknown, 0, &row, &row)));
        assert!(
            access(m.kv_mut(0).write_row(p, 4, &row, &row)),
            "past the page"
        );
        assert!(
            access(m.kv_mut(0).write_row(p, 0, &row[..3], &row)),
            "narrow"
        );
        assert!(access(m.kv_mut(0).copy_row((p, 0), (unknown, 0))));
        m.drop_page(p);
        assert!(
            access(m.kv_mut(0).write_row(p, 0, &row, &row)),
            "given back"
        );
        assert!(!m.kv(0).may_hold_nan());

        let (a, b) = (SlotId::new(0), SlotId::new(1));
        m.materialize_slot(a).unwrap();
        let err =
            |r: Result<Vec<(&mut [f32], &mut [f32])>>| matches!(r, Err(KvCacheError::Access(_)));
        assert!(err(m.recurrent_mut(0).slots_mut(&[b])), "never handed out");
        assert!(err(m.recurrent_mut(0).slots_mut(&[a, a])), "twice");
        assert!(err(m.recurrent_mut(0).slots_mut(&[SlotId::new(9)])));
        assert_eq!(m.recurrent_mut(0).slots_mut(&[a]).unwrap().len(), 1);
    }
}
