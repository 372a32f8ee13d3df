//! `edge-llm kernels check`: compiles every registered kernel with NVRTC for each
//! architecture, so a kernel that does not compile fails CI on a machine with no GPU.
//! `edge-llm kernels warm`: the same to PTX into the kernel cache, for a GPU machine.

use crate::cli_error::CliError;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// The architectures the project targets: Orin, Hopper, datacenter Blackwell, Thor,
/// desktop Blackwell.
const DEFAULT_ARCHS: &str = "sm_87,sm_90,sm_100,sm_110,sm_120";

/// `edge-llm kernels ...`.
#[derive(Subcommand, Debug)]
pub enum KernelsCommand {
    /// Compile every kernel with NVRTC for each architecture (to cubin), one line per
    /// kernel and architecture; exits non-zero if any fails.
    Check(CheckArgs),
    /// Compile every kernel to PTX for each architecture into the kernel cache that
    /// `--device cuda:N` loads from, so that a GPU machine needs only the driver (its
    /// driver must be as new as this NVRTC: CUDA 13 for NVRTC 13).
    Warm(WarmArgs),
}

/// Flags of `kernels warm`.
#[derive(Args, Debug)]
pub struct WarmArgs {
    /// Architectures, comma-separated (`sm_XY`).
    #[arg(long, value_delimiter = ',', default_value = "sm_80,sm_89,sm_90")]
    pub arch: Vec<String>,
    /// Where NVRTC is (as for `kernels check`).
    #[arg(long, value_name = "DIR")]
    pub nvrtc: Option<PathBuf>,
    /// The cache folder. Default: the one `--device cuda:N` uses,
    /// `$XDG_CACHE_HOME/edge-llm/kernels` (or `~/.cache/edge-llm/kernels`).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
}

/// Flags of `kernels check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Architectures, comma-separated (`sm_XY`).
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_ARCHS)]
    pub arch: Vec<String>,
    /// Where NVRTC is: a CUDA install root, a pip wheel's `nvidia/cu13` folder, or the
    /// folder holding libnvrtc itself. Default: $CUDA_HOME, $CUDA_PATH,
    /// /usr/local/cuda, then the loader's search path.
    #[arg(long, value_name = "DIR")]
    pub nvrtc: Option<PathBuf>,
}

/// Runs a `kernels` subcommand.
pub fn run(command: KernelsCommand) -> Result<(), CliError> {
    match command {
        KernelsCommand::Check(args) => check(args),
        KernelsCommand::Warm(args) => warm(args),
    }
}

#[cfg(not(feature = "cuda"))]
fn check(_: CheckArgs) -> Result<(), CliError> {
    Err(CliError::NoCuda("kernels check"))
}

#[cfg(not(feature = "cuda"))]
fn warm(_: WarmArgs) -> Result<(), CliError> {
    Err(CliError::NoCuda("kernels warm"))
}

/// The architectures of an `--arch` list.
#[cfg(feature = "cuda")]
fn parse_archs(names: &[String]) -> Result<Vec<edge_core::cuda::ComputeCapability>, CliError> {
    let archs = names
        .iter()
        .map(|a| {
            edge_core::cuda::ComputeCapability::from_sm_name(a.trim())
                .ok_or_else(|| CliError::Usage(format!("`{a}` in --arch is not an sm_XY name")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if archs.is_empty() {
        return Err(CliError::Usage("--arch names no architecture".into()));
    }
    Ok(archs)
}

#[cfg(feature = "cuda")]
fn warm(args: WarmArgs) -> Result<(), CliError> {
    use edge_core::cuda::{KernelCache, NvrtcLocation};
    use std::time::Instant;

    let archs = parse_archs(&args.arch)?;
    let dir = args
        .cache
        .or_else(KernelCache::user_default_dir)
        .ok_or_else(|| CliError::Usage("no cache folder: give --cache DIR".into()))?;
    let location = args
        .nvrtc
        .map_or(NvrtcLocation::Conventional, NvrtcLocation::Dir);
    let cache = KernelCache::in_dir(&dir).with_nvrtc(location);
    let sources = edge_model::kernel_sources::all_kernel_sources();
    let start = Instant::now();
    for source in &sources {
        for &arch in &archs {
            let t = Instant::now();
            let ptx = cache.ptx(source, arch)?;
            println!(
                "ok    {:<28}  {:<6}  ptx  {:6.0} ms  {:7.1} KiB",
                source.name,
                arch.sm_name(),
                t.elapsed().as_secs_f64() * 1e3,
                ptx.len() as f64 / 1024.0
            );
        }
    }
    println!(
        "kernels warm: {} entries ({} kernels x {} architectures) in {} in {:.1} s",
        sources.len() * archs.len(),
        sources.len(),
        archs.len(),
        dir.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(feature = "cuda")]
fn check(args: CheckArgs) -> Result<(), CliError> {
    use edge_core::CoreError;
    use edge_core::cuda::{CompileTarget, Nvrtc, NvrtcLocation};
    use std::time::Instant;

    let archs = parse_archs(&args.arch)?;
    let location = args
        .nvrtc
        .map_or(NvrtcLocation::Conventional, NvrtcLocation::Dir);
    let nvrtc = Nvrtc::open(&location)?;
    let (major, minor) = nvrtc.version();
    let supported: Vec<String> = nvrtc
        .supported_archs()
        .iter()
        .map(|a| format!("sm_{a}"))
        .collect();
    println!(
        "NVRTC {major}.{minor} from {} (headers: {}); supports {}",
        nvrtc.library().display(),
        nvrtc
            .include_dir()
            .map_or_else(|| "none found".to_string(), |d| d.display().to_string()),
        supported.join(" ")
    );

    let sources = edge_model::kernel_sources::all_kernel_sources();
    let width = sources.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let start = Instant::now();
    let mut failed = 0;
    for source in &sources {
        for &arch in &archs {
            let label = format!("{:<width$}  {:<7}", source.name, arch.sm_name());
            if !nvrtc.supports(arch) {
                failed += 1;
                // Thor's sm_110 (and sm_120 before 12.8) arrive only with NVRTC 13.
                let hint = if major < 13 && arch.number() >= 110 {
                    "; this architecture needs NVRTC 13"
                } else {
                    ""
                };
                println!(
                    "FAIL  {label}  not supported by NVRTC {major}.{minor} (it supports {}{hint})",
                    supported.join(" ")
                );
                continue;
            }
            let t = Instant::now();
            let result = nvrtc.compile(source, CompileTarget::Cubin(arch));
            let ms = t.elapsed().as_secs_f64() * 1e3;
            match result {
                Ok(out) => {
                    let kib = out.bytes.len() as f64 / 1024.0;
                    println!("ok    {label}  cubin  {ms:7.0} ms  {kib:7.1} KiB");
                    print_indented(&out.log);
                }
                Err(e) => {
                    failed += 1;
                    println!("FAIL  {label}  cubin  {ms:7.0} ms");
                    match e {
                        CoreError::NvrtcCompile { log, .. } => print_indented(&log),
                        other => print_indented(&other.to_string()),
                    }
                }
            }
        }
    }
    let total = sources.len() * archs.len();
    println!(
        "kernels check: {} ok, {failed} failed ({} kernels x {} architectures) in {:.1} s with NVRTC {major}.{minor}",
        total - failed,
        sources.len(),
        archs.len(),
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        return Err(CliError::KernelCheck { failed, total });
    }
    Ok(())
}

/// Prints NVRTC's log under the line it belongs to.
#[cfg(feature = "cuda")]
fn print_indented(text: &str) {
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        println!("      | {line}");
    }
}
