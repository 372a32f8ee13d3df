/// Where a computation runs.
///
/// `Cpu` is always available and is the reference every other device is tested
/// against. `Cuda(ordinal)` needs the `cuda` feature and a GPU at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// The host CPU (rayon-parallel, SIMD where the CPU has it).
    #[default]
    Cpu,
    /// A CUDA GPU, by ordinal.
    Cuda(usize),
    /// The emulated CUDA device: the CUDA backend's own kernels compiled for the host and
    /// run on the CPU (`cuda-emu`). For verification and debugging, not speed; needs the
    /// `cuda` feature but no GPU, driver or NVRTC.
    CudaEmulated,
}

impl Device {
    /// True for [`Device::Cpu`].
    pub fn is_cpu(self) -> bool {
        matches!(self, Device::Cpu)
    }

    /// True for the CUDA backend's devices: a GPU or the emulated one.
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_) | Device::CudaEmulated)
    }

    /// True when this build was compiled with CUDA support (the `cuda` feature).
    /// Whether a GPU is present is only known when a context is created.
    pub fn cuda_compiled() -> bool {
        cfg!(feature = "cuda")
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::CudaEmulated => write!(f, "cuda-emu"),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = crate::CoreError;

    /// Parses `cpu`, `cuda` (ordinal 0), `cuda:N` or `cuda-emu`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            "cuda-emu" => Ok(Device::CudaEmulated),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| {
                    crate::CoreError::DeviceUnavailable(format!(
                        "unknown device `{s}` (expected cpu, cuda, cuda:N or cuda-emu)"
                    ))
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for d in [
            Device::Cpu,
            Device::Cuda(0),
            Device::Cuda(3),
            Device::CudaEmulated,
        ] {
            assert_eq!(d.to_string().parse::<Device>().unwrap(), d);
        }
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
        assert!(matches!(
            "gpu".parse::<Device>(),
            Err(crate::CoreError::DeviceUnavailable(_))
        ));
        assert!(matches!(
            "cuda:x".parse::<Device>(),
            Err(crate::CoreError::DeviceUnavailable(_))
        ));
    }
}
