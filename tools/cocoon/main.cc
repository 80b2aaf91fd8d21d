// cocoon's executable: everything lives in cocoon_main (tools/cocoon/entry.cc).
// Runs in: caller, monitor, pid1, worker: every image of cocoon starts here
//  (tools/cocoon/entry.cc).
#include "tools/cocoon/entry.h"

int main(int argc, char** argv)
{
    return cocoon::tools::exit_now(cocoon::tools::cocoon_main(argc, argv));
}
