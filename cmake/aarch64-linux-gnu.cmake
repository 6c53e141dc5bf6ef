# Cross-compiling for aarch64 (arm64) Linux with Debian's cross compiler (g++-aarch64-linux-gnu).
# The arm64 libraries the build links (Highway, PCRE2, SentencePiece, cpp-httplib, OpenSSL,
# GoogleTest) and the header-only ones (nlohmann-json, CLI11, Eigen) come from a sysroot of
# Debian's arm64 packages extracted with dpkg -x (scripts/test_arm64.sh makes it): installing
# them with apt would have to upgrade the amd64 packages to the same version (multiarch).
# Usage: cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DPEREGRINE_ARM64_SYSROOT=<dir>
#        -DPEREGRINE_NATIVE=OFF ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The cross compiler's own libc and libstdc++ live in /usr/aarch64-linux-gnu: no --sysroot.

# try_compile projects see only cached variables: hand them the sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PEREGRINE_ARM64_SYSROOT)
if(NOT PEREGRINE_ARM64_SYSROOT)
  set(PEREGRINE_ARM64_SYSROOT "$ENV{PEREGRINE_ARM64_SYSROOT}")
endif()
if(NOT PEREGRINE_ARM64_SYSROOT)
  message(FATAL_ERROR "aarch64-linux-gnu.cmake: set PEREGRINE_ARM64_SYSROOT (scripts/test_arm64.sh makes one)")
endif()
set(sysroot "${PEREGRINE_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${sysroot}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # host tools (python3, pkg-config)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(libdir "${sysroot}/usr/lib/aarch64-linux-gnu")
set(rootlibdir "${sysroot}/lib/aarch64-linux-gnu")  # zlib

# Test programs (gtest_discover_tests, ctest) run under qemu-user: the cross libc's loader, and
# the sysroot's libraries on the guest's library path.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=${libdir}:${rootlibdir})

# The sysroot's headers before /usr/include (which Debian's cross compiler searches last; the
# sysroot holds no libc headers), and its libraries for the linker, with the ones they need in
# turn (-rpath-link: libssl for cpp-httplib).
set(CMAKE_CXX_FLAGS_INIT " -isystem ${sysroot}/usr/include/aarch64-linux-gnu -isystem ${sysroot}/usr/include")
foreach(kind EXE SHARED MODULE)
  set(CMAKE_${kind}_LINKER_FLAGS_INIT " -L${libdir} -Wl,-rpath-link,${libdir}:${rootlibdir}")
endforeach()

# pkg-config reads the sysroot's arm64 .pc files only, and prefixes their paths with it.
set(ENV{PKG_CONFIG_LIBDIR} "${libdir}/pkgconfig:${sysroot}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${sysroot}")
set(ENV{PKG_CONFIG_PATH} "")
