// The differential suite's table of command lines (rows.cc).
#pragma once

#include <vector>

#include "tests/diff/harness.h"

namespace cocoon::test::diff {

const std::vector<Row>& rows();

}  // namespace cocoon::test::diff
