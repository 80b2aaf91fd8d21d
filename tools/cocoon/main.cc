// cocoon's executable: everything lives in cocoon_main (tools/cocoon/entry.cc).
// Runs in: caller, monitor, pid1, worker: every image of cocoon starts here
//  (tools/cocoon/entry.cc).
#include "base/prefault.h"
#include "tools/cocoon/entry.h"

// Before main, and before any constructor: the image's pages, mapped at once (base/prefault.h).
__attribute__((section(".preinit_array"), used)) void (*const cocoon_preinit)() = cocoon::base::prefault_image;

int main(int argc, char** argv)
{
    return cocoon::tools::exit_now(cocoon::tools::cocoon_main(argc, argv));
}
