// With the `cuda` feature: this crate's kernels compiled for the emulated CUDA device.
include!("../../kernels/host_emulation/build_support.rs");
include!("src/kernel_entry_points.rs");

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/kernel_entry_points.rs");
    if has_feature("cuda") {
        build_host_kernels("edge_model_host_kernels", &["model"], ENTRY_POINTS);
    }
}
