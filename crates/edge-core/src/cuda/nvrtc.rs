//! NVRTC opened by path: the dozen entry points edge-llm compiles kernels with.
//!
//! cudarc's NVRTC bindings open the library themselves by fixed names and panic when
//! none loads, so they cannot take the file [`NvrtcLocation`] finds. NVRTC's C API has
//! been stable since CUDA 11, so the same few calls work with NVRTC 12 and 13.

use super::kernel_cache::ComputeCapability;
use super::nvrtc_search::{NvrtcCandidate, NvrtcLocation};
use crate::{CoreError, KernelSource, Result};
use std::ffi::{CStr, CString, c_char, c_int};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Options every kernel is compiled with (part of the PTX cache key).
///
/// IEEE f32 semantics are spelled out (no flush-to-zero, correctly rounded division and
/// square root): the quantization kernels must match the CPU byte for byte. NVRTC has no
/// `--use_fast_math=false` (it rejects any argument to that flag); leaving the flag out
/// is what turns fast math off.
pub(crate) const COMPILE_OPTIONS: &[&str] = &[
    "--std=c++17",
    "--ftz=false",
    "--prec-div=true",
    "--prec-sqrt=true",
];

/// What NVRTC is asked to produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompileTarget {
    /// PTX for the virtual architecture `compute_XY` (the driver JIT-compiles it).
    Ptx(ComputeCapability),
    /// A cubin for the real architecture `sm_XY` (machine code, checked by ptxas).
    Cubin(ComputeCapability),
}

impl std::fmt::Display for CompileTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileTarget::Ptx(a) => write!(f, "{} (ptx)", a.compute_name()),
            CompileTarget::Cubin(a) => write!(f, "{} (cubin)", a.sm_name()),
        }
    }
}

/// NVRTC's output for one source and target.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The PTX text (without its trailing NUL) or the cubin's bytes.
    pub bytes: Vec<u8>,
    /// The program log (warnings; empty when clean).
    pub log: String,
}

type Status = c_int;
type Program = *mut std::ffi::c_void;

/// The entry points, copied out of the library (valid while `_lib` is loaded).
struct Api {
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    num_supported_archs: unsafe extern "C" fn(*mut c_int) -> Status,
    supported_archs: unsafe extern "C" fn(*mut c_int) -> Status,
    create_program: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    destroy_program: unsafe extern "C" fn(*mut Program) -> Status,
    compile_program: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status,
    program_log_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    program_log: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    cubin_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    cubin: unsafe extern "C" fn(Program, *mut c_char) -> Status,
}

/// A loaded NVRTC library.
pub struct Nvrtc {
    api: Api,
    library: PathBuf,
    include_dir: Option<PathBuf>,
    version: (u32, u32),
    supported: Vec<u32>,
    // `libnvrtc-builtins` opened from beside the library, if found there (see `open_builtins`).
    _builtins: Option<libloading::Library>,
    // Keeps the code the `api` pointers point into mapped; declared last, dropped last.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("library", &self.library)
            .field("version", &self.version)
            .field("include_dir", &self.include_dir)
            .finish()
    }
}

impl Nvrtc {
    /// Opens NVRTC from the first of `location`'s candidates that loads, once per
    /// process and location (later calls share it).
    pub fn shared(location: &NvrtcLocation) -> Result<Arc<Nvrtc>> {
        static LOADED: Mutex<Vec<(NvrtcLocation, Arc<Nvrtc>)>> = Mutex::new(Vec::new());
        let mut loaded = LOADED
            .lock()
            .map_err(|_| CoreError::Cuda("NVRTC table poisoned".into()))?;
        if let Some((_, n)) = loaded.iter().find(|(l, _)| l == location) {
            return Ok(n.clone());
        }
        let nvrtc = Arc::new(Self::open(location)?);
        loaded.push((location.clone(), nvrtc.clone()));
        Ok(nvrtc)
    }

    /// Opens NVRTC from the first of `location`'s candidates that loads.
    pub fn open(location: &NvrtcLocation) -> Result<Nvrtc> {
        let mut tried = Vec::new();
        for candidate in location.candidates()? {
            match Self::open_candidate(&candidate) {
                Ok(n) => return Ok(n),
                Err(e) => tried.push(format!("{}: {e}", candidate.library.display())),
            }
        }
        Err(CoreError::NvrtcNotFound { searched: tried })
    }

    fn open_candidate(candidate: &NvrtcCandidate) -> Result<Nvrtc> {
        let err = |source: libloading::Error| CoreError::Library {
            path: candidate.library.clone(),
            source,
        };
        // SAFETY: loading NVRTC runs only its (side-effect-free) library constructors.
        let lib = unsafe { libloading::Library::new(&candidate.library) }.map_err(err)?;
        /// Copies one entry point out of `lib`.
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is NVRTC's C function of that name, and the field it
                // is stored in has the function's C signature from nvrtc.h.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(err)?
            };
        }
        let api = Api {
            version: sym!("nvrtcVersion"),
            error_string: sym!("nvrtcGetErrorString"),
            num_supported_archs: sym!("nvrtcGetNumSupportedArchs"),
            supported_archs: sym!("nvrtcGetSupportedArchs"),
            create_program: sym!("nvrtcCreateProgram"),
            destroy_program: sym!("nvrtcDestroyProgram"),
            compile_program: sym!("nvrtcCompileProgram"),
            program_log_size: sym!("nvrtcGetProgramLogSize"),
            program_log: sym!("nvrtcGetProgramLog"),
            ptx_size: sym!("nvrtcGetPTXSize"),
            ptx: sym!("nvrtcGetPTX"),
            cubin_size: sym!("nvrtcGetCUBINSize"),
            cubin: sym!("nvrtcGetCUBIN"),
        };
        let mut nvrtc = Nvrtc {
            api,
            library: candidate.library.clone(),
            include_dir: candidate.include_dir.clone(),
            version: (0, 0),
            supported: Vec::new(),
            _builtins: None,
            _lib: lib,
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: both pointers are to live c_ints.
        nvrtc.check("nvrtcVersion", unsafe {
            (nvrtc.api.version)(&mut major, &mut minor)
        })?;
        nvrtc.version = (major as u32, minor as u32);
        nvrtc._builtins = open_builtins(&candidate.library, nvrtc.version)?;
        let mut count = 0;
        // SAFETY: the pointer is to a live c_int.
        nvrtc.check("nvrtcGetNumSupportedArchs", unsafe {
            (nvrtc.api.num_supported_archs)(&mut count)
        })?;
        let mut archs = vec![0 as c_int; count.max(0) as usize];
        // SAFETY: `archs` holds the number of entries NVRTC just reported.
        nvrtc.check("nvrtcGetSupportedArchs", unsafe {
            (nvrtc.api.supported_archs)(archs.as_mut_ptr())
        })?;
        nvrtc.supported = archs.into_iter().map(|a| a as u32).collect();
        Ok(nvrtc)
    }

    /// The library file (or, when the loader found it, the name it was opened by).
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The CUDA headers folder passed as `-I`, when one was found beside the library.
    pub fn include_dir(&self) -> Option<&Path> {
        self.include_dir.as_deref()
    }

    /// NVRTC's version, e.g. `(13, 0)`.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }

    /// The real architectures this NVRTC compiles for, e.g. `[75, 80, …, 120]`.
    pub fn supported_archs(&self) -> &[u32] {
        &self.supported
    }

    /// True when this NVRTC can compile for `arch`.
    pub fn supports(&self, arch: ComputeCapability) -> bool {
        self.supported.contains(&arch.number())
    }

    /// Compiles `source` for `target` with the project's fixed options (and `-I`
    /// the CUDA headers when known). A rejected source is [`CoreError::NvrtcCompile`]
    /// carrying NVRTC's log.
    pub fn compile(&self, source: &KernelSource, target: CompileTarget) -> Result<Compiled> {
        let arch_flag = match target {
            CompileTarget::Ptx(a) => format!("--gpu-architecture={}", a.compute_name()),
            CompileTarget::Cubin(a) => format!("--gpu-architecture={}", a.sm_name()),
        };
        let mut options: Vec<String> = COMPILE_OPTIONS.iter().map(|s| s.to_string()).collect();
        options.push(arch_flag);
        if let Some(inc) = &self.include_dir {
            options.push(format!("-I{}", inc.display()));
        }
        let options = options
            .into_iter()
            .map(CString::new)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| CoreError::Cuda("an NVRTC option contains a NUL byte".into()))?;
        let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let code = CString::new(source.code)
            .map_err(|_| CoreError::Cuda(format!("kernel `{}` contains a NUL", source.name)))?;
        let name = CString::new(format!("{}.cu", source.name))
            .map_err(|_| CoreError::Cuda("kernel name contains a NUL".into()))?;

        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: `code` and `name` are NUL-terminated and outlive the call; no headers
        // are passed (count 0, null arrays).
        self.check("nvrtcCreateProgram", unsafe {
            (self.api.create_program)(
                &mut prog,
                code.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        })?;
        let result = self.compile_program(prog, &option_ptrs, source, target);
        // SAFETY: `prog` was created above and is destroyed exactly once.
        let destroyed = unsafe { (self.api.destroy_program)(&mut prog) };
        let compiled = result?;
        self.check("nvrtcDestroyProgram", destroyed)?;
        Ok(compiled)
    }

    fn compile_program(
        &self,
        prog: Program,
        options: &[*const c_char],
        source: &KernelSource,
        target: CompileTarget,
    ) -> Result<Compiled> {
        // SAFETY: `prog` is a live program; `options` points to `options.len()` live
        // NUL-terminated strings (owned by the caller for the whole call).
        let status =
            unsafe { (self.api.compile_program)(prog, options.len() as c_int, options.as_ptr()) };
        let log = self.read(prog, "log", self.api.program_log_size, self.api.program_log)?;
        let log = String::from_utf8_lossy(trim_nul(&log))
            .trim_end()
            .to_string();
        if status != 0 {
            let log = if log.is_empty() {
                self.describe(status)
            } else {
                log
            };
            return Err(CoreError::NvrtcCompile {
                name: source.name.to_string(),
                target: target.to_string(),
                log,
            });
        }
        let bytes = match target {
            CompileTarget::Ptx(_) => {
                let ptx = self.read(prog, "PTX", self.api.ptx_size, self.api.ptx)?;
                trim_nul(&ptx).to_vec()
            }
            CompileTarget::Cubin(_) => {
                self.read(prog, "CUBIN", self.api.cubin_size, self.api.cubin)?
            }
        };
        Ok(Compiled { bytes, log })
    }

    /// Reads one of a program's outputs through its size/get pair.
    fn read(
        &self,
        prog: Program,
        what: &str,
        size: unsafe extern "C" fn(Program, *mut usize) -> Status,
        get: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    ) -> Result<Vec<u8>> {
        let mut len = 0usize;
        // SAFETY: `prog` is live; the pointer is to a live usize.
        self.check(what, unsafe { size(prog, &mut len) })?;
        let mut buf = vec![0u8; len];
        if len > 0 {
            // SAFETY: `buf` holds the `len` bytes NVRTC just said it will write.
            self.check(what, unsafe { get(prog, buf.as_mut_ptr().cast()) })?;
        }
        Ok(buf)
    }

    fn check(&self, call: &str, status: Status) -> Result<()> {
        if status == 0 {
            Ok(())
        } else {
            Err(CoreError::Nvrtc {
                call: call.to_string(),
                status,
                message: self.describe(status),
            })
        }
    }

    fn describe(&self, status: Status) -> String {
        // SAFETY: nvrtcGetErrorString returns a static string (or null) for any code.
        let text = unsafe { (self.api.error_string)(status) };
        if text.is_null() {
            format!("NVRTC error {status}")
        } else {
            // SAFETY: non-null, NUL-terminated and static, as documented in nvrtc.h.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        }
    }
}

/// Opens `libnvrtc-builtins.so.X.Y` from the folder `library` is in, when it is there.
///
/// NVRTC opens its builtins by bare name at the first compile, through the loader's
/// search path, and a pip wheel's `lib/` is not on it (the library has no RPATH). The
/// loader answers a bare-name open with an already loaded object of that soname, so
/// opening the file by path first is enough.
fn open_builtins(
    library: &Path,
    (major, minor): (u32, u32),
) -> Result<Option<libloading::Library>> {
    let Some(dir) = library.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(None); // opened by bare name: the loader finds the builtins the same way
    };
    let path = dir.join(format!("libnvrtc-builtins.so.{major}.{minor}"));
    if !path.is_file() {
        return Ok(None);
    }
    // SAFETY: the builtins library only registers NVRTC's builtin headers and tables.
    let lib = unsafe { libloading::Library::new(&path) }.map_err(|source| CoreError::Library {
        path: path.clone(),
        source,
    })?;
    Ok(Some(lib))
}

fn trim_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    &bytes[..end]
}
