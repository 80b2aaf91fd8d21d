// Start-up speed: the image's writable pages made present in one call (base/prefault.h).
// Runs in: caller, pid1, worker: every image of cocoon calls it before main (the caller, a fresh
//  PID 1, the worker).
#include "base/prefault.h"

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// NOLINTNEXTLINE(bugprone-reserved-identifier): glibc's name: the first byte of .data
extern "C" char __data_start[];
extern "C" char _end[];  // the linker's: the end of .bss

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COCOON_PREFAULT_OFF 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define COCOON_PREFAULT_OFF 1
#endif

namespace cocoon::base {

// Not under the sanitizers: their runtime may not be ready before main, and their builds are not
// static.
#ifdef COCOON_PREFAULT_OFF
void prefault_image() noexcept {}
#else
constexpr std::uintptr_t kPage = 4096;

// The page p is in, and the first page boundary at or after p (pointer arithmetic: no integer
// becomes a pointer).
template <typename T> T* page_of(T* p)
{
    return p - (reinterpret_cast<std::uintptr_t>(p) & (kPage - 1));
}
template <typename T> T* page_end(T* p)
{
    const std::uintptr_t in = reinterpret_cast<std::uintptr_t>(p) & (kPage - 1);
    return in ? p + (kPage - in) : p;
}

void prefault_image() noexcept
{
    char* begin = page_of(__data_start);
    char* end = page_end(_end);
    if (end > begin && end - begin < (std::ptrdiff_t{1} << 20))
        ::madvise(begin, static_cast<size_t>(end - begin), MADV_POPULATE_WRITE);
    char here;
    char* top = page_of(&here);
    ::madvise(top - 8 * kPage, 8 * kPage, MADV_POPULATE_WRITE);
}

#endif

}  // namespace cocoon::base
