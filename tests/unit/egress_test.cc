// Unit tests of --egress's deciding parts (relay/egress.cc): the request parser, the allowlist
// patterns and the address classes. No sockets.
#include <arpa/inet.h>

#include <gtest/gtest.h>

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
    EXPECT_EQ(r.forward, "HEAD / HTTP/1.0\r\nConnection: close\r\n\r\n");
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
