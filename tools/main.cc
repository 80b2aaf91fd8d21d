// cocoon's executable: everything lives in cocoon_main (tools/entry.cc).
#include "base/sys.h"
#include "tools/entry.h"

// Start-up speed: before the other constructors (the C++ library's locale,
// libcap's and libnl's set-up), so that their code and everything after runs
// from pages mapped in one call rather than faulted in one at a time.
__attribute__((constructor(101))) static void map_image_first()
{
    cocoon::sys::map_image_code();
}

int main(int argc, char** argv)
{
    return cocoon::tools::exit_now(cocoon::tools::cocoon_main(argc, argv));
}
