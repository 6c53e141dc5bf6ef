// Includes an AVX2 kernel file twice, for the levels avx2 and avx2vnni (isa.h): the file named
// by PEREGRINE_AVX2_KERNELS opens `namespace avx2` when PEREGRINE_AVX_VNNI is 0 and `namespace
// avx2_vnni` when it is 1, where it uses AVX-VNNI's vpdpbusd / vpdpwssd. The second copy is
// compiled under the `avxvnni` target attribute, on Highway's AVX2 target only; on AVX3 (AVX-512
// without VNNI, which runs the AVX2 code) avx2_vnni names avx2. Callers pick a copy with
// `isa_level() == IsaLevel::kAvx2Vnni`. Included inside a kernel file's per-target namespace.

#define PEREGRINE_AVX_VNNI 0
#include PEREGRINE_AVX2_KERNELS
#undef PEREGRINE_AVX_VNNI

#if HWY_TARGET == HWY_AVX2
HWY_PUSH_ATTRIBUTES("avxvnni")
#define PEREGRINE_AVX_VNNI 1
#include PEREGRINE_AVX2_KERNELS
#undef PEREGRINE_AVX_VNNI
HWY_POP_ATTRIBUTES
#else
namespace avx2_vnni = avx2;
#endif
