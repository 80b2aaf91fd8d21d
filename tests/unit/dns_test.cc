// Unit tests of --egress's transparent half (relay/dns.cc, and the allowlist's questions for it in
// egress_policy.cc): the resolver's question parser against well-formed and hostile packets, the
// answers it builds, the synthetic addresses, and which names and ports the allowlist admits.
#include <arpa/inet.h>

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "relay/dns.h"
#include "relay/egress_policy.h"

namespace cocoon::relay {
namespace {

std::string u16(uint16_t v)
{
    return {static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
}

// A query as a stub resolver sends it: id 0xbeef, RD, one question.
std::string query(const std::vector<std::string>& labels, uint16_t type = kDnsTypeA, uint16_t flags = 0x0100,
                  uint16_t questions = 1)
{
    std::string out = u16(0xbeef) + u16(flags) + u16(questions) + u16(0) + u16(0) + u16(0);
    for (const std::string& label : labels)
        out += static_cast<char>(label.size()) + label;
    return out + '\0' + u16(type) + u16(kDnsClassIn);
}

in_addr addr(const char* text)
{
    in_addr a{};
    inet_pton(AF_INET, text, &a);
    return a;
}

TEST(DnsQuery, ReadsTheQuestionInLowerCase)
{
    const std::string packet = query({"Api", "Example", "COM"}, kDnsTypeAaaa);
    DnsQuestion q;
    ASSERT_EQ(parse_dns_query(packet, q), DnsParse::Ok);
    EXPECT_EQ(q.id, 0xbeef);
    EXPECT_TRUE(q.recursion_desired);
    EXPECT_EQ(q.name, "api.example.com");
    EXPECT_EQ(q.type, kDnsTypeAaaa);
    EXPECT_EQ(q.klass, kDnsClassIn);
    EXPECT_EQ(q.end, packet.size());
    // An EDNS record after the question is not read, and changes nothing.
    DnsQuestion with_opt;
    ASSERT_EQ(parse_dns_query(packet + std::string("\0\0\x29\x04\xd0\0\0\0\0\0\0", 11), with_opt), DnsParse::Ok);
    EXPECT_EQ(with_opt.end, packet.size());
}

TEST(DnsQuery, HostilePacketsAreDroppedOrFormErr)
{
    DnsQuestion q;
    EXPECT_EQ(parse_dns_query("", q), DnsParse::Drop);
    EXPECT_EQ(parse_dns_query(std::string(11, '\0'), q), DnsParse::Drop);
    EXPECT_EQ(parse_dns_query(query({"a"}, kDnsTypeA, 0x8100), q), DnsParse::Drop);  // a response
    EXPECT_EQ(parse_dns_query(query({"a"}, kDnsTypeA, 0x2900), q), DnsParse::NotImp);  // opcode 5 (UPDATE)
    EXPECT_EQ(parse_dns_query(query({"a"}, kDnsTypeA, 0x0100, 0), q), DnsParse::FormErr);
    EXPECT_EQ(parse_dns_query(query({"a"}, kDnsTypeA, 0x0100, 2), q), DnsParse::FormErr);
    const std::string good = query({"github", "com"});
    for (size_t cut = 12; cut < good.size(); ++cut)  // every truncation
        EXPECT_EQ(parse_dns_query(good.substr(0, cut), q), DnsParse::FormErr) << cut;
    // A label that claims more bytes than the packet has; a pointer (also one to itself); the
    // reserved label types; a name past 255 bytes on the wire.
    EXPECT_EQ(parse_dns_query(good.substr(0, 12) + "\x3f" + "abc", q), DnsParse::FormErr);
    EXPECT_EQ(parse_dns_query(good.substr(0, 12) + "\xc0\x0c" + u16(1) + u16(1), q), DnsParse::FormErr);
    EXPECT_EQ(parse_dns_query(good.substr(0, 12) + "\x40x" + u16(1) + u16(1), q), DnsParse::FormErr);
    EXPECT_EQ(parse_dns_query(good.substr(0, 12) + "\x80x" + u16(1) + u16(1), q), DnsParse::FormErr);
    std::vector<std::string> long_name(5, std::string(63, 'a'));  // 5 * 64 + 1 = 321 bytes
    EXPECT_EQ(parse_dns_query(query(long_name), q), DnsParse::FormErr);
    std::vector<std::string> longest(3, std::string(63, 'a'));
    longest.push_back(std::string(61, 'b'));  // 3 * 64 + 62 + 1 = 255 bytes
    ASSERT_EQ(parse_dns_query(query(longest), q), DnsParse::Ok);
    EXPECT_EQ(q.name.size(), 253U);
}

// A label with a dot or a byte no name has parses, and no rule can admit the name it gives.
TEST(DnsQuery, OddLabelsGiveANameNoRuleAdmits)
{
    EgressPolicy policy({parse_allow_rule("*.example.com")});
    DnsQuestion q;
    ASSERT_EQ(parse_dns_query(query({"a.b", "example", "com"}), q), DnsParse::Ok);
    EXPECT_EQ(q.name, "a.b.example.com");  // as asked: the allowlist's question, not a new name
    ASSERT_EQ(parse_dns_query(query({std::string("x\0y", 3), "example", "com"}), q), DnsParse::Ok);
    EXPECT_FALSE(valid_name(q.name));
    ASSERT_EQ(parse_dns_query(query({"x y", "example", "com"}), q), DnsParse::Ok);
    EXPECT_FALSE(valid_name(q.name));
    ASSERT_EQ(parse_dns_query(query({}), q), DnsParse::Ok);  // the root
    EXPECT_EQ(q.name, "");
    EXPECT_FALSE(policy.answers_name(q.name));
}

TEST(DnsAnswer, AnAddressAfterTheQuestionEchoed)
{
    const std::string packet = query({"github", "com"});
    DnsQuestion q;
    ASSERT_EQ(parse_dns_query(packet, q), DnsParse::Ok);
    const std::string answer = dns_answer(packet, q, DnsRcode::NoError, addr("127.16.0.7"), 3600);
    const std::string expected = u16(0xbeef) + u16(0x8180) + u16(1) + u16(1) + u16(0) + u16(0) + packet.substr(12) +
                                 u16(0xc00c) + u16(kDnsTypeA) + u16(kDnsClassIn) + u16(0) + u16(3600) + u16(4) +
                                 std::string("\x7f\x10\x00\x07", 4);
    EXPECT_EQ(answer, expected);
    // NXDOMAIN: the question, no answer; RD as asked.
    const std::string none = dns_answer(packet, q, DnsRcode::NxDomain);
    EXPECT_EQ(none, u16(0xbeef) + u16(0x8183) + u16(1) + u16(0) + u16(0) + u16(0) + packet.substr(12));
    DnsQuestion no_rd = q;
    no_rd.recursion_desired = false;
    EXPECT_EQ(dns_answer(packet, no_rd, DnsRcode::NoError).substr(2, 2), u16(0x8080));
}

TEST(DnsAnswer, FormErrAndNotImpAreAHeaderAlone)
{
    DnsQuestion q;
    const std::string two = query({"a"}, kDnsTypeA, 0x0100, 2);
    ASSERT_EQ(parse_dns_query(two, q), DnsParse::FormErr);
    EXPECT_EQ(dns_answer(two, q, DnsRcode::FormErr), u16(0xbeef) + u16(0x8181) + std::string(8, '\0'));
    const std::string update = query({"a"}, kDnsTypeA, 0x2900);
    ASSERT_EQ(parse_dns_query(update, q), DnsParse::NotImp);
    EXPECT_EQ(dns_answer(update, q, DnsRcode::NotImp), u16(0xbeef) + u16(0x8184) + std::string(8, '\0'));
}

TEST(SyntheticNames, StableDistinctAndCapped)
{
    SyntheticNames names;
    auto a = names.address_for("github.com");
    auto b = names.address_for("api.github.com");
    ASSERT_TRUE(a && b);
    EXPECT_EQ(ntohl(a->s_addr), 0x7f100001U);
    EXPECT_EQ(ntohl(b->s_addr), 0x7f100002U);
    EXPECT_EQ(names.address_for("github.com")->s_addr, a->s_addr);
    EXPECT_EQ(*names.name_at(*a), "github.com");
    EXPECT_EQ(*names.name_at(*b), "api.github.com");
    // Addresses no name has: another network, .0 and .255, an index not given out yet.
    for (const char* other : {"127.0.0.1", "127.16.0.0", "127.16.0.255", "127.16.0.3", "127.17.0.1", "10.16.0.1"})
        EXPECT_EQ(names.name_at(addr(other)), nullptr) << other;
    std::set<uint32_t> seen{a->s_addr, b->s_addr};
    for (size_t i = names.size(); i < SyntheticNames::kMaxNames; ++i) {
        const std::string name = "n" + std::to_string(i) + ".example.com";
        auto each = names.address_for(name);
        ASSERT_TRUE(each) << i;
        const uint32_t host = ntohl(each->s_addr);
        EXPECT_NE(host & 0xff, 0U);
        EXPECT_NE(host & 0xff, 255U);
        EXPECT_EQ(host >> 16, 0x7f10U);
        EXPECT_TRUE(seen.insert(each->s_addr).second) << name;
        EXPECT_EQ(*names.name_at(*each), name);
    }
    EXPECT_FALSE(names.address_for("one.more.example.com"));
    EXPECT_TRUE(names.address_for("github.com"));  // the names given out keep theirs
}

TEST(TransparentAllowlist, NamesOnAnyPortAndTheirPorts)
{
    EgressPolicy policy({parse_allow_rule("api.example.com"), parse_allow_rule("*.github.com:22"),
                         parse_allow_rule("192.0.2.1:8080"), parse_allow_rule("registry.npmjs.org:443")});
    EXPECT_TRUE(policy.answers_name("api.example.com"));
    EXPECT_TRUE(policy.answers_name("ssh.github.com"));
    EXPECT_FALSE(policy.answers_name("github.com"));  // *.suffix is not suffix itself
    EXPECT_FALSE(policy.answers_name("192.0.2.1"));  // an address rule names no name
    EXPECT_FALSE(policy.answers_name("example.com"));
    Allowlist list({parse_allow_rule("api.example.com"), parse_allow_rule("*.github.com:22"),
                    parse_allow_rule("192.0.2.1:8080"), parse_allow_rule("registry.npmjs.org:443")});
    EXPECT_EQ(list.name_ports(), (std::vector<uint16_t>{443, 80, 22}));
}

}  // namespace
}  // namespace cocoon::relay
