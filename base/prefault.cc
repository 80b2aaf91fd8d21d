// Start-up speed: the image's pages mapped in one call each (base/prefault.h).
// Runs in: caller, setup, pid1, worker: every image of cocoon calls it before main (the caller, a
//  fresh PID 1, the worker), and the first process again after its clone.
#include "base/prefault.h"

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// NOLINTNEXTLINE(bugprone-reserved-identifier): the linker's name: the first byte of the image
extern "C" const char __ehdr_start[];
// NOLINTNEXTLINE(bugprone-reserved-identifier): glibc's name: the first byte of .data
extern "C" char __data_start[];
extern "C" char _end[];  // the linker's: the end of .bss

// Last in tools/order/startup.order, so the linker puts it after the start-up code.
extern "C" __attribute__((noinline, used)) void cocoon_hot_text_end()
{
    asm volatile("");
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COCOON_PREFAULT_OFF 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define COCOON_PREFAULT_OFF 1
#endif

namespace cocoon::base {

// Not under the sanitizers: their runtime may not be ready before main, and their builds are
// neither static nor ordered.
#ifdef COCOON_PREFAULT_OFF
void prefault_start_code() noexcept {}
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

void prefault_start_code() noexcept
{
    const char* begin = page_of(__ehdr_start);
    const auto* end = reinterpret_cast<const char*>(&cocoon_hot_text_end);
    // Unordered, the marker can sit anywhere in a text of megabytes: then mapping up to it
    // would cost more than the faults it saves.
    constexpr std::ptrdiff_t kMost = std::ptrdiff_t{4} << 20;
    if (end <= begin || end - begin > kMost)
        return;
    ::madvise(const_cast<char*>(begin), static_cast<size_t>(end - begin), MADV_POPULATE_READ);
}

void prefault_image() noexcept
{
    prefault_start_code();
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
