//! Shared by the workspace's top-level tests: running one test body on each device
//! (`edge_core::device_test!`) over the model.
#![allow(unused_macros)] // each test file uses its own subset

/// Runs `$body` once for device `$on` with `$model`, a `&Qwen35Model<B>` (`$host`
/// itself on the CPU, its weights uploaded to the CUDA backend on `cuda:N` or
/// `cuda-emu`), and `$backend`, a closure making a fresh backend `B` of that device. The
/// body is generic code written once; the macro instantiates it for each backend type.
macro_rules! on_device {
    ($on:expr, $host:expr, |$model:ident, $backend:ident| $body:expr) => {
        match $on {
            edge_core::Device::Cpu => {
                let $model = &$host;
                let $backend = edge_model::Cpu::new;
                $body
            }
            #[cfg(feature = "cuda")]
            device => {
                let backend = edge_model::cuda::CudaBackend::for_device(device).unwrap();
                let dev = backend.device().clone();
                let uploaded = $host.to_backend(&mut { backend }).unwrap();
                let $model = &uploaded;
                let $backend = || edge_model::cuda::CudaBackend::on(dev.clone());
                $body
            }
            #[cfg(not(feature = "cuda"))]
            device => panic!("{device} needs edge-model's cuda feature"),
        }
    };
}
