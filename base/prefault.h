// Start-up speed: cocoon's image mapped a range at a time, not a page fault at a time.
// Runs in: caller, setup, pid1, worker: every image of cocoon calls it before main (the caller, a
//  fresh PID 1, the worker), and the first process again after its clone.
#pragma once

namespace cocoon::base {

// Maps the executable from its ELF header to the end of the start-up code into this process's
// page tables (MADV_POPULATE_READ): the read-only data, then the code a start runs, which
// tools/order/startup.order lays out at the front of the text and ends with the marker
// cocoon_hot_text_end. On this project's VM each page fault is a hypervisor exit (10-20 us when
// the host is busy); one call maps what took about 20 faults. A forked process needs its own
// call: the kernel copies no page table of a file mapping at fork. Does nothing where the link
// did not order the text, the kernel lacks the advice (before Linux 5.14), or under a sanitizer.
void prefault_start_code() noexcept;

// prefault_start_code, and the writable data, .bss and the next 32 KiB of stack made present and
// writable (MADV_POPULATE_WRITE): what the caller writes before its clone, about 20 faults.
void prefault_image() noexcept;

}  // namespace cocoon::base
