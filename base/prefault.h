// Start-up speed: cocoon's writable pages made present a range at a time, not a fault at a time.
// Runs in: caller, pid1, worker: every image of cocoon calls it before main (the caller, a fresh
//  PID 1, the worker).
#pragma once

namespace cocoon::base {

// The writable data, .bss and the next 32 KiB of stack made present and writable
// (MADV_POPULATE_WRITE): what the caller writes before its clone, about 20 faults. Does nothing
// where the kernel lacks the advice (before Linux 5.14) or under a sanitizer. (The code is not
// mapped ahead so: docs/benchmarks.md, "Seventh stop of 2026-12-07", says why.)
void prefault_image() noexcept;

}  // namespace cocoon::base
