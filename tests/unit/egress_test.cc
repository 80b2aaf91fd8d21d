// Unit tests of --egress's deciding parts (relay/egress.cc, egress_policy.cc, egress_log.cc): the
// request parser, the allowlist patterns, the address classes, the policy's refusal of the host's
// own addresses, the log's JSON text, tally cap and non-blocking writer (on a pipe and a socketpair).
#include <arpa/inet.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>

#include "base/sys_error.h"
#include "relay/egress.h"

namespace cocoon::relay {
namespace {

ParseResult parse(const std::string& data, ProxyRequest& out, std::string& why)
{
    size_t head = 0;
    return parse_proxy_request(data, out, head, why);
}

TEST(EgressParse, ConnectNamesHostAndPort)
{
    ProxyRequest r;
    std::string why;
    size_t head = 0;
    const std::string data = "CONNECT API.Example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n\x16\x03";
    ASSERT_EQ(parse_proxy_request(data, r, head, why), ParseResult::Ok) << why;
    EXPECT_TRUE(r.connect);
    EXPECT_EQ(r.host, "api.example.com");
    EXPECT_EQ(r.port, 443);
    EXPECT_EQ(head, data.size() - 2);  // the TLS bytes after the head are not part of it
    EXPECT_TRUE(r.forward.empty());
}

TEST(EgressParse, ConnectToAnIpv6Literal)
{
    ProxyRequest r;
    std::string why;
    ASSERT_EQ(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", r, why), ParseResult::Ok) << why;
    EXPECT_EQ(r.host, "::1");
    EXPECT_EQ(r.port, 8443);
}

TEST(EgressParse, AbsoluteUriBecomesOriginFormWithConnectionClose)
{
    ProxyRequest r;
    std::string why;
    ASSERT_EQ(parse("GET http://example.com/a/b?c=d HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n"
                    "Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nAccept: */*\r\n\r\n",
                    r, why),
              ParseResult::Ok)
        << why;
    EXPECT_FALSE(r.connect);
    EXPECT_EQ(r.host, "example.com");
    EXPECT_EQ(r.port, 80);
    EXPECT_EQ(r.forward, "GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n");
}

TEST(EgressParse, AbsoluteUriWithPortAndNoPath)
{
    ProxyRequest r;
    std::string why;
    ASSERT_EQ(parse("HEAD http://127.0.0.1:8080 HTTP/1.0\r\n\r\n", r, why), ParseResult::Ok) << why;
    EXPECT_EQ(r.host, "127.0.0.1");
    EXPECT_EQ(r.port, 8080);
    // Without a Host header the origin gets one naming the URI's authority.
    EXPECT_EQ(r.forward, "HEAD / HTTP/1.0\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\r\n");
}

TEST(EgressParse, IncompleteUntilTheBlankLine)
{
    ProxyRequest r;
    std::string why;
    EXPECT_EQ(parse("", r, why), ParseResult::Incomplete);
    EXPECT_EQ(parse("CONNECT a.b:443 HTTP/1.1\r\n", r, why), ParseResult::Incomplete);
    EXPECT_EQ(parse("CONNECT a.b:443 HTTP/1.1\r\nHost: a.b\r\n", r, why), ParseResult::Incomplete);
}

TEST(EgressParse, MalformedRequestsAreBad)
{
    for (const std::string& bad : {
             std::string("CONNECT a.b HTTP/1.1\r\n\r\n"),  // no port
             std::string("CONNECT a.b:0 HTTP/1.1\r\n\r\n"), std::string("CONNECT a.b:65536 HTTP/1.1\r\n\r\n"),
             std::string("CONNECT a.b:443 HTTP/2\r\n\r\n"), std::string("CONNECT  a.b:443 HTTP/1.1\r\n\r\n"),
             std::string("connect a.b:443 HTTP/1.1\r\n\r\n"),
             std::string("GET /relative HTTP/1.1\r\nHost: a.b\r\n\r\n"),
             std::string("GET https://a.b/ HTTP/1.1\r\n\r\n"), std::string("GET http://user@a.b/ HTTP/1.1\r\n\r\n"),
             std::string("GET http://a b/ HTTP/1.1\r\n\r\n"), std::string("CONNECT a..b:443 HTTP/1.1\r\n\r\n"),
             std::string("CONNECT [a.b]:443 HTTP/1.1\r\n\r\n"),
             std::string("CONNECT a.b:443 HTTP/1.1\r\nNoColon\r\n\r\n"),
             std::string("CONNECT a.b:443 HTTP/1.1\r\n folded: x\r\n\r\n"),
             std::string("CONNECT a.b:443 HTTP/1.1\r\nX: a\x01\r\n\r\n"),
             std::string("CONNECT a.b:443 HTTP/1.1\nHost: a.b\n\n"),  // bare LF
         }) {
        ProxyRequest r;
        std::string why;
        EXPECT_EQ(parse(bad, r, why), ParseResult::Bad) << bad;
        EXPECT_FALSE(why.empty()) << bad;
    }
}

// Security: an allowed address must not be asked for another site, and nothing after this
// request's body reaches the origin.
TEST(EgressParse, TheHostHeaderMustNameTheUrisAuthority)
{
    struct Case {
        std::string head;
        bool ok;
    } cases[] = {
        {"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", true},
        {"GET http://a.example/ HTTP/1.1\r\nHost:  A.Example:80 \r\n\r\n", true},
        {"GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example:8080\r\n\r\n", true},
        {"GET http://[::1]:8080/ HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", true},
        {"GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n", false},
        {"GET http://a.example/ HTTP/1.1\r\nHost: a.example:8080\r\n\r\n", false},
        {"GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example\r\n\r\n", false},
        {"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n", false},
        {"GET http://a.example/ HTTP/1.1\r\nHost: a.example.b.example\r\n\r\n", false},
        {"GET http://a.example/ HTTP/1.1\r\nHost: a.example/x\r\n\r\n", false},
        {"GET http://a.example/ HTTP/1.1\r\nHost: \r\n\r\n", false},
        {"POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", false},
        {"POST http://a.example/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", false},
        {"POST http://a.example/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", false},
        {"POST http://a.example/ HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", false},
        {"POST http://a.example/ HTTP/1.1\r\nContent-Length: 4294967295\r\n\r\n", true},
        {"POST http://a.example/ HTTP/1.1\r\nContent-Length: 4294967296\r\n\r\n", false},
        // CONNECT's target is its authority; its Host header is not looked at.
        {"CONNECT a.example:443 HTTP/1.1\r\nHost: b.example\r\n\r\n", true},
    };
    for (const Case& c : cases) {
        ProxyRequest r;
        std::string why;
        EXPECT_EQ(parse(c.head, r, why), c.ok ? ParseResult::Ok : ParseResult::Bad) << c.head << why;
        if (!c.ok) {
            EXPECT_TRUE(r.host.empty()) << c.head;  // nothing of a refused head is kept
        }
    }
}

TEST(EgressParse, ContentLengthIsTheBodyThatGoesUpstream)
{
    ProxyRequest r;
    std::string why;
    size_t head = 0;
    const std::string data =
        "POST http://a.example/x HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\n\r\nabcGET http://b/";
    ASSERT_EQ(parse_proxy_request(data, r, head, why), ParseResult::Ok) << why;
    EXPECT_EQ(r.body, 3U);
    EXPECT_EQ(data.substr(head, 3), "abc");
    ASSERT_EQ(parse("GET http://a.example/ HTTP/1.1\r\n\r\n", r, why), ParseResult::Ok) << why;
    EXPECT_EQ(r.body, 0U);
}

// Security: a long name is a 400 before the tally or the resolver sees it, and a refused head
// leaves `out` as it was.
TEST(EgressParse, NamesLongerThan253BytesAreBad)
{
    std::string name;
    while (name.size() < 253)
        name += "abcdefghi.";
    name.resize(253);
    ProxyRequest r;
    std::string why;
    ASSERT_EQ(parse("CONNECT " + name + ":443 HTTP/1.1\r\n\r\n", r, why), ParseResult::Ok) << why;
    EXPECT_EQ(r.host, name);
    ProxyRequest fresh;
    EXPECT_EQ(parse("CONNECT " + name + "x:443 HTTP/1.1\r\n\r\n", fresh, why), ParseResult::Bad);
    EXPECT_NE(why.find("longer than 253"), std::string::npos) << why;
    EXPECT_TRUE(fresh.host.empty());
    EXPECT_EQ(parse("CONNECT " + std::string(16000, 'a') + ":443 HTTP/1.1\r\n\r\n", fresh, why), ParseResult::Bad);
    EXPECT_TRUE(fresh.host.empty());
    EXPECT_EQ(parse("CONNECT caf\xc3\xa9.example:443 HTTP/1.1\r\n\r\n", fresh, why), ParseResult::Bad);
    EXPECT_TRUE(fresh.host.empty());
}

TEST(EgressParse, AnOversizedHeadIsBadNotWaitedFor)
{
    ProxyRequest r;
    std::string why;
    std::string data = "CONNECT a.b:443 HTTP/1.1\r\nX: " + std::string(kMaxRequestHead, 'a');
    EXPECT_EQ(parse(data, r, why), ParseResult::Bad);
    EXPECT_NE(why.find("longer than"), std::string::npos) << why;
}

// Garbage of every length never crashes the parser or reads past its input (ASan checks the
// reads); the libFuzzer target does the same at scale.
TEST(EgressParse, RandomBytesNeverCrash)
{
    std::mt19937 rng(7);
    const std::string alphabet = "CONNECT GEThttp://[]:0123456789.\r\n\x00\x7f\xff:/@?#abcXYZ";
    for (int i = 0; i < 20000; ++i) {
        std::string data(rng() % 96, '\0');
        for (char& c : data)
            c = alphabet[rng() % alphabet.size()];
        ProxyRequest r;
        std::string why;
        size_t head = 0;
        if (parse_proxy_request(data, r, head, why) == ParseResult::Ok) {
            EXPECT_LE(head, data.size());
        }
    }
}

TEST(EgressAllow, NamesWildcardsAndPorts)
{
    Allowlist list({parse_allow_rule("api.anthropic.com"), parse_allow_rule("*.googleapis.com"),
                    parse_allow_rule("localhost:8443")});
    EXPECT_TRUE(list.allows_name("api.anthropic.com", 443));
    EXPECT_TRUE(list.allows_name("api.anthropic.com", 80));
    EXPECT_FALSE(list.allows_name("api.anthropic.com", 8080));
    EXPECT_FALSE(list.allows_name("anthropic.com", 443));
    EXPECT_FALSE(list.allows_name("xapi.anthropic.com", 443));
    EXPECT_TRUE(list.allows_name("generativelanguage.googleapis.com", 443));
    EXPECT_TRUE(list.allows_name("a.b.googleapis.com", 443));
    EXPECT_FALSE(list.allows_name("googleapis.com", 443));  // the apex is not below itself
    EXPECT_FALSE(list.allows_name("evilgoogleapis.com", 443));
    EXPECT_TRUE(list.allows_name("localhost", 8443));
    EXPECT_FALSE(list.allows_name("localhost", 443));
}

TEST(EgressAllow, PatternsAreCaseInsensitive)
{
    Allowlist list({parse_allow_rule("API.Example.COM")});
    EXPECT_TRUE(list.allows_name("api.example.com", 443));
}

TEST(EgressAllow, AddressesAreListedOnlyAsAddresses)
{
    Allowlist list({parse_allow_rule("127.0.0.1:8443"), parse_allow_rule("[::1]"), parse_allow_rule("localhost")});
    EXPECT_TRUE(list.lists_address(*parse_ip_literal("127.0.0.1", 0), 8443));
    EXPECT_FALSE(list.lists_address(*parse_ip_literal("127.0.0.1", 0), 443));
    EXPECT_FALSE(list.lists_address(*parse_ip_literal("127.0.0.2", 0), 8443));
    EXPECT_TRUE(list.lists_address(*parse_ip_literal("::1", 0), 443));
    EXPECT_FALSE(list.allows_name("127.0.0.1", 8443));  // a name rule never covers an address
}

TEST(EgressAllow, BadPatternsNameThemselves)
{
    for (const char* bad : {"", ":443", "a b", "*.", "*", "a.*.b", "[::1", "::1", "[1.2.3.4]", "a.b:0", "a.b:70000",
                            "a..b", "[example.com]"}) {
        try {
            parse_allow_rule(bad);
            ADD_FAILURE() << "accepted: " << bad;
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()).rfind("--egress-allow " + std::string(bad) + ":", 0), 0U) << e.what();
        }
    }
}

TEST(EgressAddress, ClassesOfTheHostsOwnNetworks)
{
    auto cls = [](const char* text) { return internal_address_class(*parse_ip_literal(text, 0)); };
    EXPECT_EQ(cls("127.0.0.1"), "loopback");
    EXPECT_EQ(cls("127.255.0.9"), "loopback");
    EXPECT_EQ(cls("10.1.2.3"), "private");
    EXPECT_EQ(cls("172.16.0.1"), "private");
    EXPECT_EQ(cls("172.31.255.255"), "private");
    EXPECT_EQ(cls("172.32.0.1"), "");
    EXPECT_EQ(cls("192.168.1.1"), "private");
    EXPECT_EQ(cls("169.254.169.254"), "link-local");
    EXPECT_EQ(cls("100.64.0.1"), "shared (CGNAT)");
    EXPECT_EQ(cls("0.0.0.0"), "unspecified");
    EXPECT_EQ(cls("224.0.0.1"), "multicast or broadcast");
    EXPECT_EQ(cls("8.8.8.8"), "");
    EXPECT_EQ(cls("::1"), "loopback");
    EXPECT_EQ(cls("::"), "unspecified");
    EXPECT_EQ(cls("fe80::1"), "link-local");
    EXPECT_EQ(cls("fd00::1"), "private");
    EXPECT_EQ(cls("::ffff:127.0.0.1"), "loopback");  // an IPv4-mapped loopback is loopback
    EXPECT_EQ(cls("::ffff:10.0.0.1"), "private");
    EXPECT_EQ(cls("2002:7f00:1::"), "6to4");
    EXPECT_EQ(cls("2606:4700::1111"), "");
}

}  // namespace
}  // namespace cocoon::relay

namespace cocoon::relay {
namespace {

sockaddr_storage ip(const std::string& text, uint16_t port = 0)
{
    auto a = parse_ip_literal(text, port);
    EXPECT_TRUE(a.has_value()) << text;
    return a.value_or(sockaddr_storage{});
}

// Security: a name that resolves to an address of the host's own interfaces (not only loopback:
// a public eth0 address too) is refused unless that address is listed.
TEST(EgressPolicy, TheHostsOwnAddressesAreRefusedUnlessListed)
{
    EgressPolicy policy({parse_allow_rule("*.example.com"), parse_allow_rule("203.0.113.9:443")},
                        {ip("198.51.100.7"), ip("2001:db8::7"), ip("127.0.0.1"), ip("203.0.113.9")});
    std::string refused;
    // A public address of this host: refused, and says so.
    EXPECT_TRUE(policy.admit("a.example.com", {ip("198.51.100.7", 443)}, 443, refused).empty());
    EXPECT_NE(refused.find("198.51.100.7, an address of this host that is not on the allowlist"), std::string::npos)
        << refused;
    refused.clear();
    EXPECT_TRUE(policy.admit("a.example.com", {ip("2001:db8::7", 443)}, 443, refused).empty());
    refused.clear();
    // The same address mapped into IPv6.
    EXPECT_TRUE(policy.admit("a.example.com", {ip("::ffff:198.51.100.7", 443)}, 443, refused).empty());
    // Control: another public address is reached, in the resolver's order, past a refused one.
    refused.clear();
    auto ok = policy.admit("a.example.com", {ip("198.51.100.7", 443), ip("198.51.100.8", 443)}, 443, refused);
    ASSERT_EQ(ok.size(), 1U);
    EXPECT_EQ(address_text(ok[0]), "198.51.100.8");
    // Listed by address (with its port): allowed although it is the host's own.
    refused.clear();
    EXPECT_EQ(policy.admit("a.example.com", {ip("203.0.113.9", 443)}, 443, refused).size(), 1U) << refused;
    EXPECT_TRUE(policy.admit("a.example.com", {ip("203.0.113.9", 80)}, 80, refused).empty());
    // Internal classes stay refused without the own list.
    EgressPolicy bare({parse_allow_rule("*.example.com")});
    refused.clear();
    EXPECT_TRUE(bare.admit("a.example.com", {ip("10.0.0.1", 443)}, 443, refused).empty());
    EXPECT_EQ(bare.admit("a.example.com", {ip("198.51.100.7", 443)}, 443, refused).size(), 1U);
}

// A literal is the whole text: inet_pton would stop at a NUL and take what comes before it.
TEST(EgressAddress, ALiteralWithANulOrPastItsLengthIsNone)
{
    EXPECT_TRUE(parse_ip_literal("::1", 443));
    EXPECT_FALSE(parse_ip_literal(std::string("::1\0", 4) + std::string(300, '\0'), 443));
    EXPECT_FALSE(parse_ip_literal(std::string("127.0.0.1\0x", 11), 443));
    EXPECT_FALSE(parse_ip_literal("0000:0000:0000:0000:0000:0000:0000:0000:0001", 443));
    ProxyRequest r;
    std::string why;
    const std::string head = "CONNECT [::1" + std::string(300, '\0') + "]:8443 HTTP/1.1\r\n\r\n";
    EXPECT_EQ(parse(head, r, why), ParseResult::Bad) << why;
}

TEST(EgressPolicy, NamesAndLiterals)
{
    EgressPolicy policy({parse_allow_rule("api.example.com"), parse_allow_rule("192.0.2.1:8080")});
    EXPECT_EQ(policy.check_name("api.example.com", 443), "");
    EXPECT_EQ(policy.check_name("api.example.com", 8443), "api.example.com port 8443 is not on the allowlist");
    EXPECT_EQ(policy.check_literal("192.0.2.1", ip("192.0.2.1", 8080), 8080), "");
    EXPECT_EQ(policy.check_literal("192.0.2.2", ip("192.0.2.2", 8080), 8080),
              "the address 192.0.2.2 port 8080 is not on the allowlist");
}

// Every string in a log line is valid UTF-8 JSON whatever the bytes; each byte maps to one code
// point (Latin-1), so the bytes are recovered exactly.
TEST(EgressLogText, EveryByteIsEscapedToValidJson)
{
    EXPECT_EQ(json_string("a.b"), "\"a.b\"");
    EXPECT_EQ(json_string("\"\\"), "\"\\\"\\\\\"");
    EXPECT_EQ(json_string(std::string("\x00\x1f\x7f", 3)), "\"\\u0000\\u001f\\u007f\"");
    EXPECT_EQ(json_string("\x80\xff"), "\"\\u0080\\u00ff\"");
    EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\\u00c3\\u00a9\"");
    for (int b = 0; b < 256; ++b) {
        const std::string out = json_string(std::string(1, static_cast<char>(b)));
        for (char c : out)
            EXPECT_TRUE(c >= 0x20 && c < 0x7f) << b;
    }
}

// Every line names exactly one of the four results; only an allowed one says "allowed": true,
// and only the others carry a reason.
TEST(EgressLogText, ALineSaysItsResult)
{
    EgressLine line;
    line.time = "2025-01-02T03:04:05.678Z";
    line.host = "a.example";
    line.port = 443;
    line.reason = "why";
    line.duration_ms = 12;
    const std::pair<EgressResult, std::string> results[] = {{EgressResult::Allowed, "allowed"},
                                                            {EgressResult::Refused, "refused"},
                                                            {EgressResult::Unresolved, "unresolved"},
                                                            {EgressResult::Unreachable, "unreachable"}};
    for (const auto& [result, name] : results) {
        line.result = result;
        const std::string text = line_text(line);
        EXPECT_EQ(result_name(result), name);
        const std::string allowed = result == EgressResult::Allowed ? "true" : "false";
        const std::string reason = result == EgressResult::Allowed ? "" : ", \"reason\": \"why\"";
        EXPECT_EQ(text, "{ \"time\": \"2025-01-02T03:04:05.678Z\", \"host\": \"a.example\", \"port\": 443, "
                        "\"result\": \"" +
                            name + "\", \"allowed\": " + allowed + reason +
                            ", \"bytes-up\": 0, \"bytes-down\": 0, \"duration-ms\": 12 }");
    }
    line.address = "192.0.2.1";
    line.result = EgressResult::Unreachable;
    EXPECT_NE(line_text(line).find("\"port\": 443, \"address\": \"192.0.2.1\", \"result\": \"unreachable\""),
              std::string::npos)
        << line_text(line);
}

// Each result is counted per host:port and in all: entries that were never reached count for the
// refused keys' cap whatever kept them from being reached.
TEST(EgressLogTally, EachResultIsCountedPerHostAndInAll)
{
    EgressTally tally;
    ++tally.at("a.example:443", false).of(EgressResult::Allowed);
    ++tally.at("a.example:443", false).of(EgressResult::Allowed);
    ++tally.at("a.example:443", true).of(EgressResult::Unreachable);
    ++tally.at("b.example:443", true).of(EgressResult::Refused);
    ++tally.at("c.invalid:443", true).of(EgressResult::Unresolved);
    ++tally.at("d.example:80", true).of(EgressResult::Unreachable);
    const std::string line = tally.summary({3, 4, 5});
    EXPECT_EQ(line, "{ \"summary\": [ "
                    "{ \"host\": \"a.example\", \"port\": 443, \"connections\": 2, \"refused\": 0, \"unresolved\": 0, "
                    "\"unreachable\": 1, \"bytes-up\": 0, \"bytes-down\": 0 }, "
                    "{ \"host\": \"b.example\", \"port\": 443, \"connections\": 0, \"refused\": 1, \"unresolved\": 0, "
                    "\"unreachable\": 0, \"bytes-up\": 0, \"bytes-down\": 0 }, "
                    "{ \"host\": \"c.invalid\", \"port\": 443, \"connections\": 0, \"refused\": 0, \"unresolved\": 1, "
                    "\"unreachable\": 0, \"bytes-up\": 0, \"bytes-down\": 0 }, "
                    "{ \"host\": \"d.example\", \"port\": 80, \"connections\": 0, \"refused\": 0, \"unresolved\": 0, "
                    "\"unreachable\": 1, \"bytes-up\": 0, \"bytes-down\": 0 } ], "
                    "\"results\": { \"allowed\": 2, \"refused\": 1, \"unresolved\": 1, \"unreachable\": 2 }, "
                    "\"dropped\": 3, \"not-written\": 4, \"questions-dropped\": 5, \"omitted\": 0 }");
    // Unresolved and unreachable names fill the keys a flood of names may take, as refused ones do.
    EgressTally flood;
    for (int i = 0; i < 1000; ++i)
        ++flood.at("n" + std::to_string(i) + ".invalid:443", true).of(EgressResult::Unresolved);
    EXPECT_EQ(flood.size(), EgressTally::kMaxRefusedKeys);
    EXPECT_NE(flood.summary({}).find("\"(other)\", \"port\": 0, \"connections\": 0, \"refused\": 0, "
                                     "\"unresolved\": " +
                                     std::to_string(1000 - EgressTally::kMaxRefusedKeys)),
              std::string::npos);
}

// The summary stays within kMaxSummary with the widest numbers in every count it writes.
TEST(EgressLogTally, TheSummaryFitsItsCapWithTheLargestCounts)
{
    EgressTally tally;
    const std::string long_name(253, 'a');
    for (int i = 0; i < 400; ++i) {
        EgressTally::Counts& counts = tally.at(std::to_string(i) + long_name.substr(3) + ":65535", false);
        counts.allowed = counts.refused = counts.unresolved = counts.unreachable = counts.up = counts.down =
            UINT64_MAX / 1024;
    }
    const std::string line = tally.summary({UINT64_MAX, UINT64_MAX, UINT64_MAX});
    EXPECT_LE(line.size(), EgressTally::kMaxSummary);
    EXPECT_NE(line.find("\"(other)\""), std::string::npos);
    EXPECT_NE(line.find("\"dropped\": " + std::to_string(UINT64_MAX)), std::string::npos);
    EXPECT_NE(line.find("\"questions-dropped\": " + std::to_string(UINT64_MAX)), std::string::npos);
}

TEST(EgressLogTally, KeysAreCappedAndTheRestGoToOther)
{
    EgressTally tally;
    for (int i = 0; i < 10000; ++i)
        ++tally.at("refused" + std::to_string(i) + ".example:443", true).refused;
    EXPECT_EQ(tally.size(), EgressTally::kMaxRefusedKeys);
    // Hosts that were reached still get keys of their own after the flood.
    for (int i = 0; i < 1000; ++i)
        ++tally.at("reached" + std::to_string(i) + ".example:443", false).allowed;
    EXPECT_EQ(tally.size(), EgressTally::kMaxKeys);
    EXPECT_EQ(tally.at("reached0.example:443", false).allowed, 1U);
    const std::string line = tally.summary({7, 0, 0});
    EXPECT_LE(line.size(), EgressTally::kMaxSummary);
    EXPECT_NE(line.find("{ \"host\": \"(other)\", \"port\": 0, \"connections\": 936, \"refused\": 9808"),
              std::string::npos)
        << line.substr(line.size() - 300);
    EXPECT_NE(line.find("\"dropped\": 7, \"not-written\": 0, \"questions-dropped\": 0, \"omitted\": 0 }"),
              std::string::npos);
    // The reached ones come first.
    EXPECT_EQ(line.rfind("{ \"summary\": [ { \"host\": \"reached0.example\"", 0), 0U) << line.substr(0, 100);
}

TEST(EgressLogTally, TheSummaryIsCappedAndSaysWhatItLeftOut)
{
    EgressTally tally;
    const std::string long_name(253, 'a');
    for (int i = 0; i < 400; ++i)
        ++tally.at(std::to_string(i) + long_name.substr(3) + ":443", false).allowed;
    const std::string line = tally.summary({});
    EXPECT_LE(line.size(), EgressTally::kMaxSummary);
    EXPECT_GT(line.size(), EgressTally::kMaxSummary - 1024);
    const size_t omitted_at = line.find("\"omitted\": ");
    ASSERT_NE(omitted_at, std::string::npos);
    const int omitted = std::stoi(line.substr(omitted_at + 11));
    EXPECT_GT(omitted, 0);
    // Every connection is counted once: listed, or in "(other)" with the omitted and over-cap ones.
    EXPECT_NE(line.find("\"(other)\", \"port\": 0, \"connections\": " + std::to_string(400 - 256 + omitted)),
              std::string::npos);
}

// A pipe nobody reads: lines queue up to the cap, then drop whole; nothing blocks.
TEST(EgressLogWriter, AFullPipeNeverBlocksAndDropsWholeLines)
{
    int ends[2];
    ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
    UniqueFd read_end(ends[0]);
    EgressLog log{UniqueFd(ends[1])};
    const std::string line(1000, 'x');
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 3000; ++i)
        log.add(line);
    log.drain(100);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
    // 64 KiB in the pipe and 1 MiB queued were taken; the rest was dropped.
    EXPECT_GT(log.dropped(), 3000U - 1200U);
    EXPECT_LT(log.dropped(), 3000U - 1000U);
    // The caller's description is left blocking: cocoon wrote through a reopened one.
    EXPECT_EQ(::fcntl(read_end.get(), F_GETFL) & O_NONBLOCK, 0);
    // What did arrive is whole lines, in order.
    std::string got(1 << 17, '\0');
    ssize_t n = ::read(read_end.get(), got.data(), got.size());
    ASSERT_GT(n, 0);
    got.resize(static_cast<size_t>(n));
    EXPECT_EQ(got.substr(0, 1001), line + "\n");
}

TEST(EgressLogWriter, ASocketIsWrittenWithDontwait)
{
    int ends[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
    UniqueFd peer(ends[0]);
    EgressLog log{UniqueFd(ends[1])};
    for (int i = 0; i < 5000; ++i)
        log.add(std::string(1000, 'y'));
    EXPECT_GT(log.dropped(), 0U);
    EXPECT_TRUE(log.pending());
    char buf[4096];
    EXPECT_GT(::read(peer.get(), buf, sizeof buf), 0);
}

// Security: the log's byte cap. Lines stop where what is left would not hold the summary: one
// line says so, every later line is counted, and the summary still comes, within the cap.
TEST(EgressLogWriter, AtTheCapOneLineSaysSoThenOnlyTheSummary)
{
    char path[] = "/tmp/cocoon-egress-log-XXXXXX";
    UniqueFd file(::mkostemp(path, O_CLOEXEC));
    ASSERT_TRUE(file);
    ::unlink(path);
    UniqueFd reader(::dup(file.get()));
    const size_t cap = EgressLog::kSummaryRoom + 10000;
    EgressLog log(std::move(file), cap);
    const std::string line(99, 'x');  // 100 bytes with its newline
    for (int i = 0; i < 1000; ++i)
        log.add(line);
    EXPECT_EQ(log.not_written(), 900U);
    EXPECT_EQ(log.dropped(), 0U);
    EgressTally tally;
    log.add_summary(tally.summary({log.dropped(), log.not_written(), 0}));
    log.drain(100);
    std::string got(cap * 2, '\0');
    const ssize_t n = ::pread(reader.get(), got.data(), got.size(), 0);
    ASSERT_GT(n, 0);
    got.resize(static_cast<size_t>(n));
    EXPECT_LE(got.size(), cap);
    EXPECT_EQ(got.substr(0, 100), line + "\n");
    const std::string capped = log.capped_line() + "\n";
    EXPECT_EQ(got.substr(10000, capped.size()), capped);
    EXPECT_NE(got.find("\"not-written\": 900,"), std::string::npos) << got.substr(10000);
    // The largest summary fits too.
    EXPECT_LE(10000 + capped.size() + EgressTally::kMaxSummary + 1, cap);
}

}  // namespace
}  // namespace cocoon::relay
