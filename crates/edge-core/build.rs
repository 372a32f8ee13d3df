// With the `cuda` feature: the emulated CUDA device's SIMT runtime (host C++).
include!("../../kernels/host_emulation/build_support.rs");

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if !has_feature("cuda") {
        return;
    }
    let runtime = kernels_dir().join("host_emulation");
    for file in ["simt.cpp", "simt.h"] {
        println!("cargo:rerun-if-changed={}", runtime.join(file).display());
    }
    emulator_build()
        .file(runtime.join("simt.cpp"))
        .compile("edge_core_simt");
}
