//! [`device_test!`](crate::device_test): one test body instantiated on each device, on
//! the model of candle's `test_device!`.

/// Instantiates the test body `name` (a `fn name(on: Device)` in scope) as a module
/// `name` of tests, one per device:
///
/// - `cpu`: on [`Device::Cpu`](crate::Device::Cpu);
/// - `cuda_emulated`: on [`Device::CudaEmulated`](crate::Device::CudaEmulated), the CUDA
///   backend's own kernels run on the CPU (only with the calling crate's `cuda` feature);
/// - `cuda`: on GPU 0 ([`Device::Cuda`](crate::Device::Cuda)), ignored, since a GPU is
///   rarely there: run it with `-- --ignored` on a machine that has one.
///
/// `device_test!(name, cuda)` leaves out the CPU (a body that checks a CUDA path against
/// the CPU as its oracle).
///
/// ```ignore
/// fn forward_matches(on: Device) { /* build the backend for `on`, compare with the CPU */ }
/// edge_core::device_test!(forward_matches);
/// ```
#[macro_export]
macro_rules! device_test {
    ($name:ident) => {
        mod $name {
            #[test]
            fn cpu() {
                super::$name($crate::Device::Cpu)
            }
            $crate::device_test!(@cuda $name);
        }
    };
    ($name:ident, cuda) => {
        mod $name {
            $crate::device_test!(@cuda $name);
        }
    };
    (@cuda $name:ident) => {
        #[cfg(feature = "cuda")]
        #[test]
        fn cuda_emulated() {
            super::$name($crate::Device::CudaEmulated)
        }
        #[cfg(feature = "cuda")]
        #[test]
        #[ignore = "needs an NVIDIA GPU (run with -- --ignored where there is one)"]
        fn cuda() {
            super::$name($crate::Device::Cuda(0))
        }
    };
}
