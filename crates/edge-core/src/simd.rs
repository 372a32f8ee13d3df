//! CPU features: the one place edge-llm asks the CPU which instructions it has, and the
//! one level every CPU kernel choice goes through.
//!
//! # Levels
//!
//! The CPU is probed once per process ([`detected`]) and summed up as a [`SimdLevel`]:
//!
//! | level | requires | machines |
//! |---|---|---|
//! | [`SimdLevel::Avx512`] | AVX-512 F, BW, VL and VNNI, plus the AVX2 set | Ice Lake, Sapphire Rapids, Zen 4 and later |
//! | [`SimdLevel::Avx2`] | AVX2, FMA and F16C | Haswell, Zen 1 and later |
//! | [`SimdLevel::NeonI8mm`] | aarch64 i8mm (`smmla`) and dotprod | Neoverse V1/V2/N2, Jetson Thor, Graviton 3/4, Apple M2 and later |
//! | [`SimdLevel::NeonDotprod`] | aarch64 dotprod (`sdot`) | Cortex-A76/A78, Neoverse N1, Jetson Orin, Apple M1 |
//! | [`SimdLevel::Neon`] | aarch64 Advanced SIMD (always present) | Cortex-A72, Cortex-A53 |
//! | [`SimdLevel::Portable`] | nothing: plain Rust the compiler vectorises | everywhere |
//!
//! There is one definition of "AVX-512": the integer kernels of `edge-quant` need VNNI
//! (and BW/VL), so the level needs them too. Kernels that use only AVX-512 F (the
//! model's auto-vectorised loops, its FMA register blocks) still go by the level, so a
//! CPU with AVX-512 F but no VNNI (Skylake-SP/X) runs every kernel at
//! [`SimdLevel::Avx2`]: one consistent choice rather than two kernel families at two
//! levels. Extra capabilities that only some kernels use are
//! flags of [`Features`]: [`Features::avx512bf16`] on x86, [`Features::neon_bf16`]
//! (`bfmmla`) on aarch64. [`Features::sve`] is reported for benchmarks only: on the
//! Neoverse V2/V3 cores of Grace and Thor SVE vectors are 128 bits, as wide as NEON's,
//! so no kernel needs it.
//!
//! On aarch64 the three levels are ordered: every CPU with i8mm this project targets
//! has dotprod too (Armv8.6 makes both part of the architecture), and a CPU with i8mm
//! but without dotprod runs at [`SimdLevel::Neon`].
//!
//! # Proof tokens
//!
//! [`Avx2`], [`Avx512`], [`Avx512Bf16`] (x86) and [`Dotprod`], [`I8mm`], [`NeonBf16`]
//! (aarch64) are zero-sized tokens that can only be built once detection found their
//! features, so holding one is what makes a call into a
//! `#[target_feature]` function sound. [`Token`] is a level together with its token;
//! [`token`] gives the one kernels should run now.
//!
//! # Forcing a level
//!
//! [`level`] is the detected level, unless the calling thread runs inside
//! [`with_level`], which forces a level (at most the detected one) for a closure and
//! for all the rayon work it starts: the closure runs on a rayon pool kept for that
//! level, whose threads carry it. That is the one override, for tests and benchmarks
//! (to run the AVX2 or portable kernels on an AVX-512 machine); there is no environment
//! variable and no process-wide switch. Threads the closure spawns by other means than
//! rayon run at the detected level.
//!
//! # Compiling a loop per level
//!
//! [`dispatch!`] compiles a block once per x86 level (with that level's target
//! features) and once portably, and runs the variant of [`token`]: the way to
//! vectorise plain loops for AVX-512 or AVX2 without writing intrinsics. On aarch64
//! the portable variant is the NEON one (NEON is baseline, and dotprod and i8mm do
//! nothing for float loops), so it compiles once.

use crate::error::{CoreError, Result};
use std::cell::Cell;
use std::sync::OnceLock;

/// The instruction-set level of a family of CPU kernels (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimdLevel {
    /// Plain Rust, written so the compiler can vectorize it; available everywhere.
    Portable,
    /// x86-64 AVX2 + FMA + F16C (Haswell and later).
    Avx2,
    /// x86-64 AVX-512 F/BW/VL/VNNI (Ice Lake, Sapphire Rapids, Zen 4 and later), plus
    /// the AVX2 set.
    Avx512,
    /// aarch64 Advanced SIMD (always present on aarch64).
    Neon,
    /// aarch64 Advanced SIMD with the dot-product instructions (`sdot`, Armv8.2
    /// FEAT_DotProd): Jetson Orin, Neoverse N1, Apple M1.
    NeonDotprod,
    /// aarch64 with the int8 matrix multiply (`smmla`, FEAT_I8MM) and dotprod: Jetson
    /// Thor, Neoverse V1/V2/N2, Apple M2 and later.
    NeonI8mm,
}

impl SimdLevel {
    /// Every level, best first.
    pub const ALL: [SimdLevel; 6] = [
        SimdLevel::Avx512,
        SimdLevel::Avx2,
        SimdLevel::NeonI8mm,
        SimdLevel::NeonDotprod,
        SimdLevel::Neon,
        SimdLevel::Portable,
    ];

    /// Whether this build, on this CPU, can run the level.
    pub fn is_available(self) -> bool {
        self.token().is_some()
    }

    /// The level with its proof token, if this build on this CPU can run it.
    pub fn token(self) -> Option<Token> {
        match self {
            SimdLevel::Portable => Some(Token::Portable),
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => Avx2::detect().map(Token::Avx2),
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => Avx512::detect().map(Token::Avx512),
            #[cfg(target_arch = "aarch64")]
            SimdLevel::Neon => Some(Token::Neon),
            #[cfg(target_arch = "aarch64")]
            SimdLevel::NeonDotprod => Dotprod::detect().map(Token::NeonDotprod),
            #[cfg(target_arch = "aarch64")]
            SimdLevel::NeonI8mm => I8mm::detect().map(Token::NeonI8mm),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// A short lowercase name (`"avx512"`, `"avx2"`, `"neon-i8mm"`, `"neon-dotprod"`,
    /// `"neon"`, `"portable"`).
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Portable => "portable",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Neon => "neon",
            SimdLevel::NeonDotprod => "neon-dotprod",
            SimdLevel::NeonI8mm => "neon-i8mm",
        }
    }

    /// The level named `name` (as [`SimdLevel::name`] writes it).
    pub fn from_name(name: &str) -> Option<SimdLevel> {
        SimdLevel::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Position in [`SimdLevel::ALL`] (the index of the level's pool).
    fn index(self) -> usize {
        match self {
            SimdLevel::Avx512 => 0,
            SimdLevel::Avx2 => 1,
            SimdLevel::NeonI8mm => 2,
            SimdLevel::NeonDotprod => 3,
            SimdLevel::Neon => 4,
            SimdLevel::Portable => 5,
        }
    }
}

impl std::fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What detection found on this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Features {
    /// The best level this build can run here.
    pub level: SimdLevel,
    /// AVX-512 BF16 (`vdpbf16ps`) on top of [`SimdLevel::Avx512`]: the bf16 GEMM and
    /// the bf16 decode kernels of `edge-quant`. Never set below that level.
    pub avx512bf16: bool,
    /// aarch64 BF16 (FEAT_BF16: `bfmmla`, `bfdot`) on top of [`SimdLevel::NeonI8mm`]:
    /// the bf16 prompt GEMM of `edge-quant`. Never set below that level.
    pub neon_bf16: bool,
    /// aarch64 SVE. Reported only (see the module docs); no kernel needs it.
    pub sve: bool,
}

impl Features {
    /// The names of the set flags beyond the level (`"avx512bf16"`, `"bf16"`, `"sve"`),
    /// for reports.
    pub fn extras(&self) -> Vec<&'static str> {
        [
            (self.avx512bf16, "avx512bf16"),
            (self.neon_bf16, "bf16"),
            (self.sve, "sve"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }
}

/// The CPU's features, probed on the first call and remembered for the process.
pub fn detected() -> Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    *FEATURES.get_or_init(probe)
}

/// The one place the workspace runs the CPU feature checks.
fn probe() -> Features {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("fma") && has!("f16c");
        let avx512 =
            avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni");
        let level = match (avx512, avx2) {
            (true, _) => SimdLevel::Avx512,
            (false, true) => SimdLevel::Avx2,
            (false, false) => SimdLevel::Portable,
        };
        Features {
            level,
            avx512bf16: avx512 && has!("avx512bf16"),
            neon_bf16: false,
            sve: false,
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        let dotprod = has!("dotprod");
        let i8mm = dotprod && has!("i8mm");
        let level = match (i8mm, dotprod) {
            (true, _) => SimdLevel::NeonI8mm,
            (false, true) => SimdLevel::NeonDotprod,
            (false, false) => SimdLevel::Neon,
        };
        Features {
            level,
            avx512bf16: false,
            neon_bf16: i8mm && has!("bf16"),
            sve: has!("sve"),
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Features {
            level: SimdLevel::Portable,
            avx512bf16: false,
            neon_bf16: false,
            sve: false,
        }
    }
}

thread_local! {
    /// The level [`with_level`] forced on this thread (set on the threads of its pools).
    static FORCED: Cell<Option<SimdLevel>> = const { Cell::new(None) };
}

/// The level kernels run at now: the detected one, or the one [`with_level`] forced on
/// this thread. Never above [`detected`]'s.
#[inline]
pub fn level() -> SimdLevel {
    FORCED.with(Cell::get).unwrap_or_else(|| detected().level)
}

/// [`level`] with its proof token.
#[inline]
pub fn token() -> Token {
    // Every level `level` returns is available: the detected one by definition, a
    // forced one because `with_level` checked it.
    level().token().unwrap_or(Token::Portable)
}

/// Runs `f` with [`level`] forced to `level`, on this thread and on every rayon worker
/// that runs work `f` starts: `f` runs on a rayon pool kept for that level (built on
/// first use, as many threads as the current pool), whose threads all report `level`.
/// Calls nest; the innermost wins.
///
/// Returns [`CoreError::SimdLevelUnavailable`] (without running `f`) if this build or
/// CPU cannot run `level`, so a forced level never exceeds the hardware.
pub fn with_level<R: Send>(level: SimdLevel, f: impl FnOnce() -> R + Send) -> Result<R> {
    if !level.is_available() {
        return Err(CoreError::SimdLevelUnavailable(level));
    }
    if FORCED.with(Cell::get).is_none() && level == detected().level {
        return Ok(f());
    }
    static POOLS: [OnceLock<rayon::ThreadPool>; SimdLevel::ALL.len()] =
        [const { OnceLock::new() }; SimdLevel::ALL.len()];
    let slot = &POOLS[level.index()];
    let pool = match slot.get() {
        Some(pool) => pool,
        None => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(rayon::current_num_threads())
                .thread_name(move |i| format!("simd-{level}-{i}"))
                .start_handler(move |_| FORCED.with(|l| l.set(Some(level))))
                .build()?;
            // A racing caller may have stored one first; that one is kept.
            slot.get_or_init(|| pool)
        }
    };
    Ok(pool.install(f))
}

/// Token proving AVX2, FMA and F16C are available.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// `Some` if this CPU has AVX2, FMA and F16C (whatever level is forced: choose
    /// kernels with [`token`]).
    pub fn detect() -> Option<Self> {
        matches!(detected().level, SimdLevel::Avx2 | SimdLevel::Avx512).then_some(Avx2(()))
    }
}

/// Token proving the [`SimdLevel::Avx512`] features: AVX-512 F/BW/VL/VNNI and the
/// AVX2 set.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Avx512(());

#[cfg(target_arch = "x86_64")]
impl Avx512 {
    /// `Some` if this CPU has AVX-512 F, BW, VL and VNNI besides AVX2, FMA and F16C
    /// (whatever level is forced: choose kernels with [`token`]).
    pub fn detect() -> Option<Self> {
        (detected().level == SimdLevel::Avx512).then_some(Avx512(()))
    }

    /// The AVX2 token this one implies (the level requires the AVX2 set).
    pub fn avx2(self) -> Avx2 {
        Avx2(())
    }

    /// The BF16 token, if this CPU also has AVX-512 BF16.
    pub fn bf16(self) -> Option<Avx512Bf16> {
        detected().avx512bf16.then_some(Avx512Bf16(()))
    }
}

/// Token proving AVX-512 BF16 on top of the [`SimdLevel::Avx512`] features (Cooper
/// Lake, Sapphire Rapids, Zen 4 and later).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Avx512Bf16(());

#[cfg(target_arch = "x86_64")]
impl Avx512Bf16 {
    /// `Some` if this CPU has the [`Avx512`] features and AVX-512 BF16.
    pub fn detect() -> Option<Self> {
        Avx512::detect().and_then(Avx512::bf16)
    }

    /// The AVX-512 token this one implies.
    pub fn avx512(self) -> Avx512 {
        Avx512(())
    }
}

/// Token proving aarch64 dotprod (`sdot`, `udot`).
#[cfg(target_arch = "aarch64")]
#[derive(Clone, Copy, Debug)]
pub struct Dotprod(());

#[cfg(target_arch = "aarch64")]
impl Dotprod {
    /// `Some` if this CPU has dotprod (whatever level is forced: choose kernels with
    /// [`token`]).
    pub fn detect() -> Option<Self> {
        matches!(
            detected().level,
            SimdLevel::NeonDotprod | SimdLevel::NeonI8mm
        )
        .then_some(Dotprod(()))
    }
}

/// Token proving the [`SimdLevel::NeonI8mm`] features: aarch64 i8mm (`smmla`) and
/// dotprod.
#[cfg(target_arch = "aarch64")]
#[derive(Clone, Copy, Debug)]
pub struct I8mm(());

#[cfg(target_arch = "aarch64")]
impl I8mm {
    /// `Some` if this CPU has i8mm and dotprod (whatever level is forced: choose
    /// kernels with [`token`]).
    pub fn detect() -> Option<Self> {
        (detected().level == SimdLevel::NeonI8mm).then_some(I8mm(()))
    }

    /// The dotprod token this one implies (the level requires dotprod).
    pub fn dotprod(self) -> Dotprod {
        Dotprod(())
    }

    /// The BF16 token, if this CPU also has FEAT_BF16.
    pub fn bf16(self) -> Option<NeonBf16> {
        detected().neon_bf16.then_some(NeonBf16(()))
    }
}

/// Token proving aarch64 BF16 (`bfmmla`, `bfdot`) on top of the
/// [`SimdLevel::NeonI8mm`] features.
#[cfg(target_arch = "aarch64")]
#[derive(Clone, Copy, Debug)]
pub struct NeonBf16(());

#[cfg(target_arch = "aarch64")]
impl NeonBf16 {
    /// `Some` if this CPU has the [`I8mm`] features and BF16.
    pub fn detect() -> Option<Self> {
        I8mm::detect().and_then(I8mm::bf16)
    }
}

/// A level together with the proof that this CPU runs it: what kernel choices match
/// on.
#[derive(Clone, Copy, Debug)]
pub enum Token {
    /// [`SimdLevel::Portable`].
    Portable,
    /// [`SimdLevel::Avx2`].
    #[cfg(target_arch = "x86_64")]
    Avx2(Avx2),
    /// [`SimdLevel::Avx512`].
    #[cfg(target_arch = "x86_64")]
    Avx512(Avx512),
    /// [`SimdLevel::Neon`] (baseline on aarch64: no proof needed).
    #[cfg(target_arch = "aarch64")]
    Neon,
    /// [`SimdLevel::NeonDotprod`].
    #[cfg(target_arch = "aarch64")]
    NeonDotprod(Dotprod),
    /// [`SimdLevel::NeonI8mm`].
    #[cfg(target_arch = "aarch64")]
    NeonI8mm(I8mm),
}

impl Token {
    /// The level this token stands for.
    pub fn level(self) -> SimdLevel {
        match self {
            Token::Portable => SimdLevel::Portable,
            #[cfg(target_arch = "x86_64")]
            Token::Avx2(_) => SimdLevel::Avx2,
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(_) => SimdLevel::Avx512,
            #[cfg(target_arch = "aarch64")]
            Token::Neon => SimdLevel::Neon,
            #[cfg(target_arch = "aarch64")]
            Token::NeonDotprod(_) => SimdLevel::NeonDotprod,
            #[cfg(target_arch = "aarch64")]
            Token::NeonI8mm(_) => SimdLevel::NeonI8mm,
        }
    }

    /// The AVX2 token, at [`SimdLevel::Avx2`] and above: for kernels that need only
    /// the AVX2 set.
    #[cfg(target_arch = "x86_64")]
    pub fn avx2(self) -> Option<Avx2> {
        match self {
            Token::Avx2(t) => Some(t),
            Token::Avx512(t) => Some(t.avx2()),
            Token::Portable => None,
        }
    }

    /// The AVX-512 token, at [`SimdLevel::Avx512`].
    #[cfg(target_arch = "x86_64")]
    pub fn avx512(self) -> Option<Avx512> {
        match self {
            Token::Avx512(t) => Some(t),
            _ => None,
        }
    }

    /// The dotprod token, at [`SimdLevel::NeonDotprod`] and above.
    #[cfg(target_arch = "aarch64")]
    pub fn dotprod(self) -> Option<Dotprod> {
        match self {
            Token::NeonDotprod(t) => Some(t),
            Token::NeonI8mm(t) => Some(t.dotprod()),
            Token::Neon | Token::Portable => None,
        }
    }

    /// The i8mm token, at [`SimdLevel::NeonI8mm`].
    #[cfg(target_arch = "aarch64")]
    pub fn i8mm(self) -> Option<I8mm> {
        match self {
            Token::NeonI8mm(t) => Some(t),
            _ => None,
        }
    }
}

/// Calls `$body` (a block over the named arguments, returning nothing: results go
/// through `&mut` arguments) compiled for the level of [`token`]: once with AVX-512 F +
/// AVX2 + FMA enabled, once with AVX2 + FMA, and once for the build's baseline (named
/// `$name`, the portable variant; on aarch64 NEON is baseline). Functions the body
/// calls must be `#[inline(always)]` to inherit the features.
///
/// ```
/// fn scale(x: &mut [f32], by: f32) {
///     edge_core::simd::dispatch!(scale_portable, (x: &mut [f32], by: f32) {
///         x.iter_mut().for_each(|v| *v *= by);
///     })
/// }
/// let mut x = [1.0, 2.0];
/// scale(&mut x, 3.0);
/// assert_eq!(x, [3.0, 6.0]);
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! __simd_dispatch {
    ($name:ident, ($($arg:ident : $ty:ty),*) $body:block) => {{
        fn $name($($arg: $ty),*) $body
        #[cfg(target_arch = "x86_64")]
        let out = {
            #[target_feature(enable = "avx512f,avx2,fma")]
            unsafe fn avx512($($arg: $ty),*) $body
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2($($arg: $ty),*) $body
            match $crate::simd::token() {
                // SAFETY: the token proves the SimdLevel::Avx512 features, which include
                // AVX-512 F, AVX2 and FMA.
                $crate::simd::Token::Avx512(_) => unsafe { avx512($($arg),*) },
                // SAFETY: the token proves AVX2, FMA and F16C.
                $crate::simd::Token::Avx2(_) => unsafe { avx2($($arg),*) },
                $crate::simd::Token::Portable => $name($($arg),*),
            }
        };
        #[cfg(not(target_arch = "x86_64"))]
        let out = $name($($arg),*);
        out
    }};
}

#[doc(inline)]
pub use __simd_dispatch as dispatch;

#[cfg(test)]
mod tests {
    use super::*;

    /// The level is the best one the CPU's raw feature bits allow.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn detected_level_matches_the_feature_bits() {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("fma") && has!("f16c");
        let avx512 = has!("avx512f") && has!("avx512bw") && has!("avx512vl");
        let want = if avx2 && avx512 && has!("avx512vnni") {
            SimdLevel::Avx512
        } else if avx2 {
            SimdLevel::Avx2
        } else {
            SimdLevel::Portable
        };
        assert_eq!(detected().level, want);
        assert_eq!(
            detected().avx512bf16,
            want == SimdLevel::Avx512 && has!("avx512bf16")
        );
        for arm in [SimdLevel::Neon, SimdLevel::NeonDotprod, SimdLevel::NeonI8mm] {
            assert!(!arm.is_available(), "{arm}");
        }
        assert!(!detected().neon_bf16 && !detected().sve);
        let extras = detected().extras();
        assert_eq!(extras.contains(&"avx512bf16"), detected().avx512bf16);
        assert_eq!(extras.len(), usize::from(detected().avx512bf16));
    }

    /// The level is the best one the CPU's raw feature bits allow.
    #[test]
    #[cfg(target_arch = "aarch64")]
    fn detected_level_matches_the_feature_bits() {
        use std::arch::is_aarch64_feature_detected as has;
        let want = if has!("dotprod") && has!("i8mm") {
            SimdLevel::NeonI8mm
        } else if has!("dotprod") {
            SimdLevel::NeonDotprod
        } else {
            SimdLevel::Neon
        };
        let f = detected();
        assert_eq!(f.level, want);
        assert_eq!(f.neon_bf16, want == SimdLevel::NeonI8mm && has!("bf16"));
        assert_eq!(f.sve, has!("sve"));
        assert!(!f.avx512bf16);
        assert_eq!(f.extras().contains(&"bf16"), f.neon_bf16);
        assert_eq!(f.extras().contains(&"sve"), f.sve);
        assert!(!SimdLevel::Avx2.is_available() && !SimdLevel::Avx512.is_available());
        // Every level at or below the detected one is available, for forcing.
        let order = [SimdLevel::Neon, SimdLevel::NeonDotprod, SimdLevel::NeonI8mm];
        let at = order.iter().position(|&l| l == want).unwrap();
        for (i, l) in order.into_iter().enumerate() {
            assert_eq!(l.is_available(), i <= at, "{l}");
        }
        assert!(Token::NeonDotprod(Dotprod(())).dotprod().is_some());
        assert_eq!(token().i8mm().is_some(), want == SimdLevel::NeonI8mm);
        assert_eq!(token().dotprod().is_some(), want != SimdLevel::Neon);
    }

    #[test]
    fn level_is_the_detected_one_outside_with_level() {
        assert_eq!(level(), detected().level);
        assert_eq!(token().level(), level());
        assert!(level().is_available());
        assert!(SimdLevel::Portable.is_available());
        assert_eq!(level().to_string(), level().name());
        for l in SimdLevel::ALL {
            assert_eq!(SimdLevel::from_name(l.name()), Some(l));
            assert_eq!(SimdLevel::ALL[l.index()], l);
        }
        assert_eq!(SimdLevel::from_name("sse2"), None);
    }

    /// A forced level holds in the closure and on the rayon workers it uses, nests, and
    /// ends with the closure.
    #[test]
    fn with_level_forces_every_available_level_on_the_workers() {
        use rayon::prelude::*;
        for l in SimdLevel::ALL.into_iter().filter(|l| l.is_available()) {
            let seen = with_level(l, || {
                let inner = with_level(SimdLevel::Portable, level).unwrap();
                assert_eq!(inner, SimdLevel::Portable);
                let on_workers: Vec<SimdLevel> =
                    (0..64).into_par_iter().map(|_| token().level()).collect();
                assert!(on_workers.iter().all(|&w| w == l), "{on_workers:?}");
                level()
            })
            .unwrap();
            assert_eq!(seen, l);
        }
        assert_eq!(level(), detected().level);
    }

    #[test]
    fn with_level_refuses_a_level_the_cpu_lacks() {
        for l in SimdLevel::ALL.into_iter().filter(|l| !l.is_available()) {
            let r = with_level(l, || unreachable!("ran at an unavailable level"));
            assert!(matches!(r, Err(CoreError::SimdLevelUnavailable(got)) if got == l));
        }
    }

    /// [`dispatch!`] runs at every level and gives the portable result.
    #[test]
    fn dispatch_runs_at_each_level() {
        fn sum_sq(x: &[f32], sum: &mut f32) {
            dispatch!(sum_sq_portable, (x: &[f32], sum: &mut f32) {
                *sum = x.iter().map(|v| v * v).sum();
            })
        }
        let x: Vec<f32> = (0..100).map(|i| i as f32 * 0.5).collect();
        let want: f32 = x.iter().map(|v| v * v).sum();
        for l in SimdLevel::ALL.into_iter().filter(|l| l.is_available()) {
            let mut got = f32::NAN;
            with_level(l, || sum_sq(&x, &mut got)).unwrap();
            assert!((got - want).abs() <= want * 1e-6, "{l}: {got} vs {want}");
        }
    }
}
