// The pure helpers of base/sys.h: what they answer for the paths the mount set-up and the login
// files give them.
#include "base/sys.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace cocoon {
namespace {

using Split = std::pair<std::string, std::string>;

TEST(SplitParent, TheDirectoryAndTheLastComponent)
{
    EXPECT_EQ(sys::split_parent("/a/b/c"), Split("/a/b", "c"));
    EXPECT_EQ(sys::split_parent("/etc"), Split("/", "etc"));
    EXPECT_EQ(sys::split_parent("dir/file"), Split("dir", "file"));
}

TEST(SplitParent, APathWithoutASlashIsInTheCurrentDirectory)
{
    EXPECT_EQ(sys::split_parent("file"), Split(".", "file"));
    EXPECT_EQ(sys::split_parent(""), Split(".", ""));
}

TEST(SplitParent, LexicalOnly)
{
    // A trailing slash leaves the name empty; "." and ".." are names like any other.
    EXPECT_EQ(sys::split_parent("/a/"), Split("/a", ""));
    EXPECT_EQ(sys::split_parent("/"), Split("/", ""));
    EXPECT_EQ(sys::split_parent("/a/.."), Split("/a", ".."));
}

}  // namespace
}  // namespace cocoon
