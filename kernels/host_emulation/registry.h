// The emulated device's kernel table: each `extern "C"` kernel compiled for the host,
// with an entry that unpacks a cuLaunchKernel-style argument array (a pointer to each
// argument's value) and a letter for each parameter's type, so that the launching side
// can check a launch's arguments (their number, order and types) before running it.
// Included after simt.h and the kernels by the tables that build scripts generate.

#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

struct EqHostKernel {
    const char* source;  // the KernelSource name (the NVRTC module)
    const char* name;
    void (*entry)(void**);
    // One letter a parameter: p pointer, u u32, i i32, U u64, I i64, f f32.
    const char* params;
};

template <typename T>
constexpr char eq_param_kind() {
    if constexpr (std::is_pointer_v<T>) {
        return 'p';
    } else if constexpr (std::is_same_v<T, float>) {
        return 'f';
    } else if constexpr (std::is_integral_v<T> && sizeof(T) == 4) {
        return std::is_signed_v<T> ? 'i' : 'u';
    } else if constexpr (std::is_integral_v<T> && sizeof(T) == 8) {
        return std::is_signed_v<T> ? 'I' : 'U';
    } else {
        static_assert(sizeof(T) == 0, "a kernel parameter type the emulator cannot pass");
    }
}

template <auto K>
struct EqEntry;

template <typename... P, void (*K)(P...)>
struct EqEntry<K> {
    static void run(void** args) { call(args, std::index_sequence_for<P...>{}); }
    template <std::size_t... I>
    static void call(void** args, std::index_sequence<I...>) {
        K(*static_cast<std::remove_cv_t<P>*>(args[I])...);
    }
    static constexpr char params[] = {eq_param_kind<std::remove_cv_t<P>>()..., '\0'};
};

#define EQ_HOST_KERNEL(SOURCE, NAME) \
    EqHostKernel { SOURCE, #NAME, &EqEntry<&NAME>::run, EqEntry<&NAME>::params }
