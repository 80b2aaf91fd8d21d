// e2e: --egress for clients that ignore the proxy variables (relay/dns.h). Inside, the resolver on
// 127.0.0.1:53 (named by /etc/resolv.conf) gives each name the allowlist admits an address of its
// own and every other name NXDOMAIN; a connection to that address on an allowed port goes, as a
// CONNECT would, to the real name on the host; everything else is refused and logged. A local
// HTTP server stands in for the internet: the rules name it as localhost:PORT plus its address
// 127.0.0.1:PORT (loopback is refused unless listed), and the sandbox's own /etc/hosts does not
// list localhost, so the sandbox's C library asks cocoon's resolver. Runs as root and
// unprivileged (CI's second pass).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/relay_support.h"

namespace cocoon::test {
namespace {

using namespace relay_e2e;

class Transparent : public ::testing::Test {
protected:
    // A sandbox with its own network and --egress with `allow`, /etc from the host but an
    // /etc/hosts without localhost; `script` runs in sh; the log goes to m_log.
    Result run_script(const std::vector<std::string>& allow, const std::string& script,
                      const std::vector<std::string>& extra = {}, const std::string& shell = "/bin/sh")
    {
        write_file(m_dir / "hosts", "127.0.0.1 nothing-here\n");
        std::vector<std::string> words =
            args({{cocoon_bin()},
                  minimal_root(),
                  {"--ro-bind", "/etc", "/etc", "--ro-bind", m_dir / "hosts", "/etc/hosts", "--unshare-all", "--proc",
                   "/proc", "--dev", "/dev", "--egress", "3128", "--egress-log", "3"},
                  extra});
        for (const std::string& pattern : allow)
            words.insert(words.end(), {"--egress-allow", pattern});
        words.insert(words.end(), {shell, "-c", script});
        std::string line = "exec 3>'" + m_log + "'; exec";
        for (const std::string& word : words) {
            std::string quoted = "'";
            for (char c : word)
                quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
            line += " " + quoted + "'";
        }
        return run({"/bin/sh", "-c", line}, "", 30000);
    }

    std::vector<std::string> log_lines() const { return lines(read_file(m_log)); }

    std::string find_line(const std::string& part) const
    {
        for (const std::string& line : log_lines())
            if (contains(line, part))
                return line;
        return "";
    }

    TempDir m_dir;
    const std::string m_log = m_dir / "egress.log";
};

// The first IPv4 address the sandbox's C library gives for $1 (getaddrinfo with AI_ADDRCONFIG,
// which asks nothing while lo has 127.0.0.1 alone: what the sandbox's 127.16.0.1/16 is for).
const std::string kLookup = "lookup() { getent ahostsv4 \"$1\" | { read -r a rest && echo \"$a\"; }; }\n";
const std::string kCurl = "curl -q -sS --noproxy '*' --max-time 10 -o /dev/null -w '%{http_code}\\n' ";

TEST_F(Transparent, AClientThatIgnoresTheProxyReachesAnAllowedNameAndNothingElse)
{
    HttpServer web("transparent\n");
    const std::string port = std::to_string(web.port());
    Result r = run_script({"localhost:" + port, "127.0.0.1:" + port},
                          kLookup +
                              "grep -c '^nameserver 127.0.0.1$' /etc/resolv.conf\n"
                              "a=$(lookup localhost); echo \"localhost=$a\"\n"
                              "[ \"$(lookup localhost)\" = \"$a\" ] && echo stable\n"
                              // curl by name, no proxy ("localhost." so that curl asks DNS: it knows "localhost").
                              + kCurl + "http://localhost.:" + port +
                              "/curl\n"
                              // A raw socket (bash's /dev/tcp: getaddrinfo, connect, write, read).
                              "exec 5<>/dev/tcp/localhost/" +
                              port + " && printf 'GET /raw HTTP/1.0\\r\\nHost: localhost:" + port +
                              "\\r\\n\\r\\n' >&5 && { read -r status <&5; echo \"raw: $status\"; }\n"
                              "exec 5<&-\n"
                              "getent ahosts unlisted.test || echo \"unlisted: $?\"\n"
                              // A client that knows an address and no name reaches nothing (the transparent
                              // listener takes 127.0.0.1 too, and resets it).
                              "curl -q -s --noproxy '*' --max-time 5 http://127.0.0.1:" +
                              port + "/ || echo \"by address: refused\"\n",
                          {}, "/bin/bash");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "1\nlocalhost=127.16.0.1\nstable\n200\nraw: HTTP/1.1 200 OK\r\nunlisted: 2\nby address: "
                     "refused\n")
        << r.err;
    EXPECT_EQ(web.requests(),
              (std::vector<std::string>{"GET /curl host=localhost.:" + port, "GET /raw host=localhost:" + port}));
    const std::string allowed = find_line("\"via\": \"transparent\"");
    EXPECT_TRUE(contains(allowed, "\"host\": \"localhost\", \"port\": " + port +
                                      ", \"via\": \"transparent\", \"address\": \"127.0.0.1\", \"result\": "
                                      "\"allowed\""))
        << read_file(m_log);
    EXPECT_TRUE(contains(find_line("unlisted.test"), "\"host\": \"unlisted.test\", \"port\": 53, \"via\": \"dns\", "
                                                     "\"result\": \"refused\", \"allowed\": false, \"reason\": "
                                                     "\"unlisted.test is not on the allowlist\""))
        << read_file(m_log);
    EXPECT_TRUE(contains(find_line("\"host\": \"127.0.0.1\""),
                         "\"reason\": \"the address 127.0.0.1 stands for no name the resolver gave out\""))
        << read_file(m_log);
}

// Each refusal of a transparent connection: a reset for the client (curl says 56, or 7 when the
// reset comes before it looked at its connect), a line saying why, and nothing reached. With
// --cap-drop ALL, as the agent recipe runs.
TEST_F(Transparent, WhatTheAllowlistDoesNotNameIsReset)
{
    HttpServer web("no\n");
    const std::string port = std::to_string(web.port());
    Result r = run_script({"localhost:" + port, "127.0.0.1:" + port, "*.example.com"},
                          kLookup +
                              "w=$(lookup www.example.com); echo \"www=$w\"\n"
                              // An admitted name on a port its rule does not allow.
                              "curl -q -s --noproxy '*' --max-time 5 \"http://$w:" +
                              port +
                              "/\" || echo \"other port: refused\"\n"
                              // An address the resolver never gave out.
                              "curl -q -s --noproxy '*' --max-time 5 http://127.16.0.99:" +
                              port +
                              "/ || echo \"no name: refused\"\n"
                              // A port no rule allows has no listener.
                              "curl -q -s --noproxy '*' --max-time 5 \"http://$w:81/\" || echo \"port 81: $?\"\n"
                              // AAAA: an empty answer, so clients take the IPv4 address.
                              "getent ahostsv6 www.example.com || echo \"v6: $?\"\n",
                          {"--cap-drop", "ALL"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "www=127.16.0.1\nother port: refused\nno name: refused\nport 81: 7\nv6: 2\n") << r.err;
    EXPECT_EQ(web.requests(), std::vector<std::string>{});
    EXPECT_TRUE(contains(find_line("www.example.com"),
                         "\"host\": \"www.example.com\", \"port\": " + port +
                             ", \"via\": \"transparent\", \"result\": \"refused\", \"allowed\": false, \"reason\": "
                             "\"www.example.com port " +
                             port + " is not on the allowlist\""))
        << read_file(m_log);
    EXPECT_TRUE(contains(find_line("127.16.0.99"), "\"reason\": \"the address 127.16.0.99 stands for no name the "
                                                   "resolver gave out\""))
        << read_file(m_log);
}

// Questions no stub resolver sends (cut short, a pointer loop, a response, random bytes) get
// FORMERR or nothing, and the resolver answers the next good question.
TEST_F(Transparent, HostileQuestionsLeaveTheResolverAnswering)
{
    Result r =
        run_script({"api.example.com"},
                   kLookup + "exec 4<>/dev/udp/127.0.0.1/53\n"
                             "printf '\\001\\002\\001\\000\\000\\001\\000\\000\\000\\000\\000\\000\\300\\014\\000"
                             "\\001\\000\\001' >&4\n"
                             "printf '\\001\\002\\201\\000\\000\\001' >&4\n"
                             "i=0; while [ $i -lt 200 ]; do head -c $((i * 7 % 600 + 1)) /dev/urandom >&4; "
                             "i=$((i + 1)); done\n"
                             "lookup api.example.com\n",
                   {}, "/bin/bash");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "127.16.0.1\n") << r.err;
}

// --egress-allow port 3128 is --egress's own: no transparent listener there (the proxy has the
// port on 127.0.0.1); the other allowed ports still listen.
TEST_F(Transparent, ThePortsAreTheNameRulesButTheProxysOwn)
{
    Result r = run_script({"a.example.com:3128", "b.example.com:8443", "192.0.2.1:9999"},
                          "cat /proc/net/tcp | while read -r sl local rest; do echo \"$local\"; done | sort\n");
    EXPECT_EQ(r.code, 0) << r.err;
    // 127.0.0.1:3128 (0100007F:0C38) and 0.0.0.0:8443 (00000000:20FB); no 9999 (an address rule).
    EXPECT_EQ(r.out, "00000000:20FB\n0100007F:0C38\nlocal_address\n") << r.err;
}

}  // namespace
}  // namespace cocoon::test
