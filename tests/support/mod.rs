//! Shared by the workspace's top-level tests (and edge-runtime's, by path): running one
//! test body on each device (`edge_core::device_test!`) over the model.
#![allow(unused_macros)] // each test file uses its own subset

/// Runs `$body` once for device `$on` with `$model`, a `&Qwen35Model<B>` (`$host`
/// itself on the CPU, its weights uploaded to the CUDA backend on `cuda:N` or
/// `cuda-emu`), and `$backend`, a closure making a fresh backend `B` of that device. The
/// body is generic code written once; the macro instantiates it for each backend type.
/// `on_device!(arc on, ...)` gives `$model` as an `&Arc<Qwen35Model<B>>` (for engines).
macro_rules! on_device {
    (arc $on:expr, $host:expr, |$model:ident, $backend:ident| $body:expr) => {
        on_device!(@wrap std::sync::Arc::new, $on, $host, |$model, $backend| $body)
    };
    ($on:expr, $host:expr, |$model:ident, $backend:ident| $body:expr) => {
        on_device!(@wrap std::convert::identity, $on, $host, |$model, $backend| $body)
    };
    (@wrap $wrap:path, $on:expr, $host:expr, |$model:ident, $backend:ident| $body:expr) => {
        match $on {
            edge_core::Device::Cpu => {
                let owned = $wrap($host);
                let $model = &owned;
                let $backend = edge_model::Cpu::new;
                $body
            }
            #[cfg(feature = "cuda")]
            device => {
                let backend = edge_model::cuda::CudaBackend::for_device(device).unwrap();
                let dev = backend.device().clone();
                let owned = $wrap($host.to_backend(&mut { backend }).unwrap());
                let $model = &owned;
                let $backend = || edge_model::cuda::CudaBackend::on(dev.clone());
                $body
            }
            #[cfg(not(feature = "cuda"))]
            device => panic!("{device} needs the cuda feature"),
        }
    };
}
