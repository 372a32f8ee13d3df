/// A CUDA C++ source compiled at run time. `code` is usually `include_str!` of a file in
/// the workspace's `kernels/` folder (with any shared header concatenated in front).
///
/// Plain text, so it exists without the `cuda` feature too: the kernel registry and its
/// test (every `.cu` file is registered) run in every build.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    /// A short unique name, used for the module table and the cache file name.
    pub name: &'static str,
    /// The full CUDA C++ source.
    pub code: &'static str,
}
