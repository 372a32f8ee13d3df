use super::nvrtc::{COMPILE_OPTIONS, CompileTarget, Nvrtc};
use super::nvrtc_search::NvrtcLocation;
use crate::{CoreError, KernelSource, Result};
use std::path::{Path, PathBuf};

/// A GPU architecture, e.g. 9.0 for Hopper (sm_90).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ComputeCapability {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl ComputeCapability {
    /// The NVRTC virtual architecture flag value, e.g. `compute_90`.
    pub fn compute_name(self) -> String {
        format!("compute_{}{}", self.major, self.minor)
    }

    /// The real architecture name, e.g. `sm_90`.
    pub fn sm_name(self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }

    /// The number NVRTC lists architectures by, e.g. 90 or 110.
    pub fn number(self) -> u32 {
        self.major * 10 + self.minor
    }

    /// Parses `sm_87`, `sm_110`, `compute_90` or a bare `90` (the last digit is the
    /// minor version); `None` for anything else.
    pub fn from_sm_name(name: &str) -> Option<Self> {
        let digits = name
            .strip_prefix("sm_")
            .or_else(|| name.strip_prefix("compute_"))
            .unwrap_or(name);
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        Some(ComputeCapability {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

/// Compiles kernel sources with NVRTC once per (source, architecture) and keeps the PTX
/// on disk, so a process start after the first only reads a file.
///
/// The cache key is a 64-bit FNV-1a hash of the source text, the compile options and the
/// architecture; a changed kernel therefore never loads stale PTX. With no directory the
/// cache only compiles (useful for read-only installs).
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: Option<PathBuf>,
    nvrtc: NvrtcLocation,
}

impl KernelCache {
    /// A cache that stores compiled PTX under `dir` (created on first write).
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        KernelCache {
            dir: Some(dir.into()),
            nvrtc: NvrtcLocation::default(),
        }
    }

    /// A cache that keeps nothing on disk.
    pub fn disabled() -> Self {
        KernelCache {
            dir: None,
            nvrtc: NvrtcLocation::default(),
        }
    }

    /// Compiles with the NVRTC found at `location` (default: the conventional places).
    pub fn with_nvrtc(mut self, location: NvrtcLocation) -> Self {
        self.nvrtc = location;
        self
    }

    /// The conventional per-user location: `$XDG_CACHE_HOME/edge-llm/kernels`, else
    /// `$HOME/.cache/edge-llm/kernels`; `None` when neither variable is set.
    pub fn user_default_dir() -> Option<PathBuf> {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
            .map(|base| base.join("edge-llm").join("kernels"))
    }

    /// The directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The file a source's PTX is cached in for `arch`.
    pub fn entry_path(&self, source: &KernelSource, arch: ComputeCapability) -> Option<PathBuf> {
        let key = cache_key(source.code, arch);
        self.dir.as_ref().map(|d| {
            d.join(format!(
                "{}-sm{}{}-{key:016x}.ptx",
                source.name, arch.major, arch.minor
            ))
        })
    }

    /// Returns the PTX for `source` on `arch`, compiling with NVRTC on a miss.
    pub fn ptx(&self, source: &KernelSource, arch: ComputeCapability) -> Result<String> {
        self.ptx_with(source, arch, |source, arch| {
            let compiled = Nvrtc::shared(&self.nvrtc)?.compile(source, CompileTarget::Ptx(arch))?;
            String::from_utf8(compiled.bytes).map_err(|_| {
                CoreError::Cuda(format!("NVRTC's PTX for `{}` is not UTF-8", source.name))
            })
        })
    }

    /// The cache logic with the compiler injected (tests use a fake compiler).
    pub(crate) fn ptx_with(
        &self,
        source: &KernelSource,
        arch: ComputeCapability,
        compile: impl FnOnce(&KernelSource, ComputeCapability) -> Result<String>,
    ) -> Result<String> {
        let path = self.entry_path(source, arch);
        if let Some(path) = &path
            && let Ok(text) = std::fs::read_to_string(path)
        {
            return Ok(text);
        }
        let ptx = compile(source, arch)?;
        if let Some(path) = path {
            write_atomically(&path, &ptx)?;
        }
        Ok(ptx)
    }
}

/// Writes through a temporary file and a rename so a concurrent reader never sees a
/// half-written entry.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let io = |source| CoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    // Unique per process and per write: two threads compiling the same kernel must
    // not write into one temporary file while the other renames it.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn cache_key(code: &str, arch: ComputeCapability) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let arch = arch.compute_name();
    let parts = COMPILE_OPTIONS
        .iter()
        .map(|s| s.as_bytes())
        .chain([code.as_bytes(), arch.as_bytes()]);
    for part in parts {
        for &b in part.iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    const SM90: ComputeCapability = ComputeCapability { major: 9, minor: 0 };
    const SRC: KernelSource = KernelSource {
        name: "demo",
        code: "extern \"C\" __global__ void k() {}",
    };

    #[test]
    fn parses_architecture_names() {
        let parse = ComputeCapability::from_sm_name;
        assert_eq!(
            parse("sm_87"),
            Some(ComputeCapability { major: 8, minor: 7 })
        );
        assert_eq!(
            parse("sm_110"),
            Some(ComputeCapability {
                major: 11,
                minor: 0
            })
        );
        assert_eq!(parse("compute_120").map(|a| a.number()), Some(120));
        assert_eq!(parse("90").map(|a| a.sm_name()), Some("sm_90".into()));
        assert_eq!(parse("sm_9"), None);
        assert_eq!(parse("sm_90a"), None);
        assert_eq!(parse("gfx90"), None);
    }

    #[test]
    fn key_depends_on_source_and_arch() {
        let sm80 = ComputeCapability { major: 8, minor: 0 };
        assert_ne!(cache_key(SRC.code, SM90), cache_key(SRC.code, sm80));
        assert_ne!(cache_key(SRC.code, SM90), cache_key("other", SM90));
        assert_eq!(cache_key(SRC.code, SM90), cache_key(SRC.code, SM90));
    }

    #[test]
    fn compiles_once_then_reads_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let cache = KernelCache::in_dir(dir);
        let first = cache
            .ptx_with(&SRC, SM90, |_, _| Ok("PTX-A".to_string()))
            .unwrap();
        assert_eq!(first, "PTX-A");
        let second = cache
            .ptx_with(&SRC, SM90, |_, _| panic!("must hit the cache"))
            .unwrap();
        assert_eq!(second, "PTX-A");
        // Another architecture is another entry.
        let sm89 = ComputeCapability { major: 8, minor: 9 };
        let other = cache
            .ptx_with(&SRC, sm89, |_, _| Ok("PTX-B".to_string()))
            .unwrap();
        assert_eq!(other, "PTX-B");
    }

    #[test]
    fn compile_errors_propagate_and_nothing_is_cached() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let cache = KernelCache::in_dir(dir);
        let err = cache
            .ptx_with(&SRC, SM90, |_, _| Err(CoreError::Cuda("boom".into())))
            .unwrap_err();
        assert!(err.to_string().contains("boom"));
        assert!(!cache.entry_path(&SRC, SM90).unwrap().exists());
    }
}
