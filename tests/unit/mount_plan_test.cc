// Unit tests of the mount planner (mount/plan.cc). No privilege needed.
#include <gtest/gtest.h>

#include "base/sys_error.h"
#include "mount/plan.h"

using namespace cocoon::mount;

TEST(NormalizeDest, MakesAbsoluteAndCanonical)
{
    EXPECT_EQ(normalize_dest("/usr"), "/usr");
    EXPECT_EQ(normalize_dest("usr/lib"), "/usr/lib");
    EXPECT_EQ(normalize_dest("//a///b/./c/"), "/a/b/c");
    EXPECT_EQ(normalize_dest("/"), "/");
    EXPECT_EQ(normalize_dest("./."), "/");
    EXPECT_EQ(normalize_dest("/a/..b/c.."), "/a/..b/c..");
}

TEST(NormalizeDest, RejectsDotDotAndEmpty)
{
    EXPECT_THROW(normalize_dest("/a/../b"), cocoon::UsageError);
    EXPECT_THROW(normalize_dest(".."), cocoon::UsageError);
    EXPECT_THROW(normalize_dest("/a/.."), cocoon::UsageError);
    EXPECT_THROW(normalize_dest(""), cocoon::UsageError);
    try {
        normalize_dest("/x/../etc");
        FAIL();
    } catch (const cocoon::UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("/x/../etc"), std::string::npos);
    }
}

TEST(MakePlan, KeepsCommandLineOrderAndNormalizes)
{
    Plan plan = make_plan(
        {Tmpfs{"tmp", 0700}, Bind{"/src", "/a//b", BindKind::ReadOnly, true}, Dir{"/d/", 0755}, RemountRo{"/a/b"}});
    ASSERT_EQ(plan.ops.size(), 4u);
    EXPECT_EQ(std::get<Tmpfs>(plan.ops[0]).dest, "/tmp");
    EXPECT_EQ(std::get<Tmpfs>(plan.ops[0]).mode, 0700u);
    const Bind& bind = std::get<Bind>(plan.ops[1]);
    EXPECT_EQ(bind.source, "/src");
    EXPECT_EQ(bind.dest, "/a/b");
    EXPECT_EQ(bind.kind, BindKind::ReadOnly);
    EXPECT_TRUE(bind.optional);
    EXPECT_EQ(dest_of(plan.ops[2]), "/d");
    EXPECT_EQ(dest_of(plan.ops[3]), "/a/b");
}

TEST(MakePlan, ExpandsDev)
{
    Plan plan = make_plan({Dev{"/dev"}, Dir{"/after"}});
    ASSERT_FALSE(plan.ops.empty());
    EXPECT_EQ(std::get<Tmpfs>(plan.ops.front()).dest, "/dev");
    EXPECT_EQ(dest_of(plan.ops.back()), "/after");
    int binds = 0, links = 0, devpts = 0;
    for (const Op& op : plan.ops) {
        if (auto* b = std::get_if<Bind>(&op)) {
            ++binds;
            EXPECT_EQ(b->kind, BindKind::Dev);
            EXPECT_EQ(b->source.substr(0, 5), "/dev/");
            EXPECT_EQ(b->dest, b->source);
        }
        if (auto* l = std::get_if<Symlink>(&op)) {
            ++links;
            if (l->dest == "/dev/ptmx") {
                EXPECT_EQ(l->target, "pts/ptmx");
            }
            if (l->dest == "/dev/fd") {
                EXPECT_EQ(l->target, "/proc/self/fd");
            }
        }
        devpts += std::holds_alternative<Devpts>(op);
    }
    EXPECT_EQ(binds, 6);  // null zero full random urandom tty
    EXPECT_EQ(links, 6);  // fd stdin stdout stderr core ptmx
    EXPECT_EQ(devpts, 1);
    // /dev is sized to what it holds; shm is a tmpfs of its own, 64 MiB unless --size says.
    EXPECT_TRUE(std::get<Tmpfs>(plan.ops.front()).fit);
    EXPECT_EQ(std::get<Tmpfs>(plan.ops.front()).size, 0u);
    const Tmpfs* shm = nullptr;
    for (const Op& op : plan.ops)
        if (auto* t = std::get_if<Tmpfs>(&op); t && t->dest == "/dev/shm")
            shm = t;
    ASSERT_NE(shm, nullptr);
    EXPECT_EQ(shm->size, kShmSize);
    EXPECT_EQ(shm->mode, 0755u);
    EXPECT_FALSE(shm->fit);
    Plan sized = make_plan({Dev{"/d", 4096}});
    for (const Op& op : sized.ops)
        if (auto* t = std::get_if<Tmpfs>(&op); t && t->dest == "/d/shm") {
            EXPECT_EQ(t->size, 4096u);
        }
}

TEST(MakePlan, DevElsewhere)
{
    Plan plan = make_plan({Dev{"sandbox/dev"}});
    EXPECT_EQ(std::get<Bind>(plan.ops[1]).dest, "/sandbox/dev/null");
    EXPECT_EQ(std::get<Bind>(plan.ops[1]).source, "/dev/null");
}

TEST(MakePlan, RejectsDotDotInAnyOp)
{
    EXPECT_THROW(make_plan({Bind{"/a", "/x/../y"}}), cocoon::UsageError);
    EXPECT_THROW(make_plan({Symlink{"../ok-as-target", "/y/.."}}), cocoon::UsageError);
    EXPECT_NO_THROW(make_plan({Symlink{"../target-may-have-dots", "/y"}}));
}

TEST(ParentMode, FollowsTheGroupAndOtherBitsOfPerms)
{
    EXPECT_EQ(parent_mode_for(0700), 0700u);
    EXPECT_EQ(parent_mode_for(0750), 0750u);
    EXPECT_EQ(parent_mode_for(0640), 0750u);
    EXPECT_EQ(parent_mode_for(0705), 0705u);
    EXPECT_EQ(parent_mode_for(0741), 0755u);
    EXPECT_EQ(parent_mode_for(0000), 0700u);
    EXPECT_EQ(parent_mode_for(07777), 0755u);
}

TEST(FdUse, NamesTheOptionThatReadsTheFd)
{
    auto use = fd_use(Op{Data{3, "/f", DataKind::File, kFileMode}});
    ASSERT_TRUE(use);
    EXPECT_EQ(use->fd, 3);
    EXPECT_STREQ(use->option, "--file");
    EXPECT_STREQ(fd_use(Data{4, "/f", DataKind::Bind})->option, "--bind-data");
    EXPECT_STREQ(fd_use(Data{5, "/f", DataKind::RoBind})->option, "--ro-bind-data");
    // cocoon's own file (--egress's resolv.conf) reads no fd.
    Data own{-1, "/etc/resolv.conf", DataKind::RoBind};
    own.bytes = "nameserver 127.0.0.1\n";
    EXPECT_FALSE(fd_use(own));
    EXPECT_FALSE(fd_use(Op{own}));
    EXPECT_STREQ(fd_use(Bind{"", "/d", BindKind::ReadWrite, false, 6})->option, "--bind-fd");
    EXPECT_STREQ(fd_use(Bind{"", "/d", BindKind::ReadOnly, false, 7})->option, "--ro-bind-fd");
    EXPECT_EQ(fd_use(Bind{"", "/d", BindKind::ReadOnly, false, 7})->fd, 7);
    EXPECT_FALSE(fd_use(Bind{"/src", "/d"}));
    EXPECT_FALSE(fd_use(Op{Tmpfs{"/t"}}));
    EXPECT_FALSE(fd_use(InputOp{Chmod{"/t", 0700}}));
    EXPECT_FALSE(fd_use(InputOp{Dev{"/dev"}}));
}

TEST(MakePlan, NormalizesTheNewOpsAndKeepsTheirFields)
{
    Plan plan =
        make_plan({Data{3, "etc//motd", DataKind::RoBind, 0640, 0750}, Chmod{"/a/./b/", 0711}, Mqueue{"dev/mqueue"},
                   Tmpfs{"/t/", 0700, 4096, 0700}, Bind{"", "x/", BindKind::ReadOnly, false, 9}});
    ASSERT_EQ(plan.ops.size(), 5u);
    const Data& data = std::get<Data>(plan.ops[0]);
    EXPECT_EQ(data.dest, "/etc/motd");
    EXPECT_EQ(data.fd, 3);
    EXPECT_EQ(data.kind, DataKind::RoBind);
    EXPECT_EQ(data.mode, 0640u);
    EXPECT_EQ(data.parent_mode, 0750u);
    EXPECT_EQ(std::get<Chmod>(plan.ops[1]).dest, "/a/b");
    EXPECT_EQ(std::get<Chmod>(plan.ops[1]).mode, 0711u);
    EXPECT_EQ(std::get<Mqueue>(plan.ops[2]).dest, "/dev/mqueue");
    EXPECT_EQ(std::get<Tmpfs>(plan.ops[3]).size, 4096u);
    EXPECT_EQ(std::get<Tmpfs>(plan.ops[3]).dest, "/t");
    EXPECT_EQ(std::get<Bind>(plan.ops[4]).fd, 9);
    EXPECT_EQ(std::get<Bind>(plan.ops[4]).dest, "/x");
    EXPECT_THROW(make_plan({Data{3, "/a/../b"}}), cocoon::UsageError);
    EXPECT_THROW(make_plan({Chmod{"/a/..", 0700}}), cocoon::UsageError);
}

TEST(MakePlan, AnFdIsUsedOnce)
{
    EXPECT_NO_THROW(
        make_plan({Data{3, "/a"}, Data{4, "/b", DataKind::Bind}, Bind{"", "/c", BindKind::ReadOnly, false, 5}}));
    try {
        make_plan({Data{3, "/a"}, Bind{"", "/c", BindKind::ReadOnly, false, 3}});
        FAIL();
    } catch (const cocoon::UsageError& e) {
        EXPECT_STREQ(e.what(), "--ro-bind-fd 3: fd 3 is already used by --file");
    }
    EXPECT_THROW(make_plan({Data{0, "/a"}, Data{0, "/b"}}), cocoon::UsageError);
}

TEST(MakePlan, DevWithAConsoleBindsItLast)
{
    Plan plan = make_plan({Dev{"/dev"}, Dir{"/after"}}, std::string("/dev/pts/3"));
    Plan without = make_plan({Dev{"/dev"}, Dir{"/after"}});
    ASSERT_EQ(plan.ops.size(), without.ops.size() + 1);
    // After the devpts mount, so nothing of --dev covers it.
    const Bind& console = std::get<Bind>(plan.ops[plan.ops.size() - 2]);
    EXPECT_TRUE(std::holds_alternative<Devpts>(plan.ops[plan.ops.size() - 3]));
    EXPECT_EQ(console.source, "/dev/pts/3");
    EXPECT_EQ(console.dest, "/dev/console");
    EXPECT_EQ(console.kind, BindKind::Dev);
    EXPECT_FALSE(console.optional);
    EXPECT_EQ(dest_of(plan.ops.back()), "/after");
    for (const Op& op : without.ops)
        EXPECT_NE(dest_of(op), "/dev/console");
}

TEST(TmpfsInodes, OnePer2KibOfSizeAtLeast256)
{
    // One inode per 2 KiB of --size, at least 256.
    EXPECT_EQ(tmpfs_inodes(1 << 20), 512u);
    EXPECT_EQ(tmpfs_inodes(64ull << 20), 32768u);
    EXPECT_EQ(tmpfs_inodes(1ull << 30), 524288u);
    EXPECT_EQ(tmpfs_inodes(4096), 256u);
    EXPECT_EQ(tmpfs_inodes(1), 256u);
    EXPECT_EQ(tmpfs_inodes(0x7fffffffffffffffULL), 0x7fffffffffffffffULL / 2048);
}
