//! `edge-llm kernels check`: compiles every registered kernel with NVRTC for each
//! architecture, so a kernel that does not compile fails CI on a machine with no GPU.

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
    }
}

#[cfg(not(feature = "cuda"))]
fn check(_: CheckArgs) -> Result<(), CliError> {
    Err(CliError::NoCuda("kernels check"))
}

#[cfg(feature = "cuda")]
fn check(args: CheckArgs) -> Result<(), CliError> {
    use edge_core::CoreError;
    use edge_core::cuda::{CompileTarget, ComputeCapability, Nvrtc, NvrtcLocation};
    use std::time::Instant;

    let archs = args
        .arch
        .iter()
        .map(|a| {
            ComputeCapability::from_sm_name(a.trim())
                .ok_or_else(|| CliError::Usage(format!("`{a}` in --arch is not an sm_XY name")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if archs.is_empty() {
        return Err(CliError::Usage("--arch names no architecture".into()));
    }
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
