// Start-up speed: the image's pages mapped in one call each (base/prefault.h).
// Runs in: caller, setup, pid1, worker: every image of cocoon calls it before main (the caller, a
//  fresh PID 1, the worker), and the first process again after its clone.
#include "base/prefault.h"

#include <sys/mman.h>

#include <cstdint>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

extern "C" const char __ehdr_start[];  // the linker's: the first byte of the image
extern "C" char __data_start[];  // glibc's: the first byte of .data
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
void prefault_start_code() noexcept
{
    constexpr std::uintptr_t kPage = 4096;
    const auto begin = reinterpret_cast<std::uintptr_t>(__ehdr_start) & ~(kPage - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(&cocoon_hot_text_end);
    // Unordered, the marker can sit anywhere in a text of megabytes: then mapping up to it
    // would cost more than the faults it saves.
    constexpr std::uintptr_t kMost = std::uintptr_t{4} << 20;
    if (end <= begin || end - begin > kMost)
        return;
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
}

void prefault_image() noexcept
{
    prefault_start_code();
    constexpr std::uintptr_t kPage = 4096;
    const auto begin = reinterpret_cast<std::uintptr_t>(__data_start) & ~(kPage - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(_end) + kPage - 1) & ~(kPage - 1);
    if (end > begin && end - begin < (std::uintptr_t{1} << 20))
        ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
    char here;
    const auto sp = reinterpret_cast<std::uintptr_t>(&here) & ~(kPage - 1);
    ::madvise(reinterpret_cast<void*>(sp - 8 * kPage), 8 * kPage, MADV_POPULATE_WRITE);
}

#endif

}  // namespace cocoon::base
