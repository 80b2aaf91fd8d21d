// --egress's transparent half, for clients that ignore the proxy variables (relay/dns.h): the
// resolver that answers on the sandbox's 127.0.0.1:53, and the clients of the transparent
// listeners, which become CONNECTs to the name their address stands for. Runs in the confined
// relay worker, in the same loop as the proxy (egress.cc).
// Security: a question is read into a fixed buffer and parsed by parse_dns_query alone; at most
// kQuestionsPerWake are answered per wake and Egress::kQuestionsPerSecond a second (the rest wait
// unread, and the kernel drops what the socket does not hold: counted), and the names that get an
// address are capped (SyntheticNames::kMaxNames). A transparent client is checked, resolved and
// connected (by the monitor) exactly as a CONNECT is: the same policy, the same log.
// Runs in: worker.
#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

#include "base/sys_error.h"
#include "relay/egress.h"
#include "relay/egress_client.h"
#include "relay/resolver.h"

namespace cocoon::relay {

namespace {

constexpr int kQuestionsPerWake = 64;
// A question larger than this is not one a stub resolver sends; it is cut, then FORMERR.
constexpr size_t kMaxQuestion = 1232;
// The synthetic addresses hold for the run: a client may keep them as long as it likes.
constexpr uint32_t kTtlSeconds = 3600;
// At the end, at most this many questions left in the socket's queue are read to be counted
// (its default receive buffer holds a few hundred).
constexpr int kMaxUnreadAtEnd = 4096;

}  // namespace

void Egress::add_resolver(UniqueFd socket)
{
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kResolverSocketToken;
    check(::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, socket.get(), &ev), "epoll_ctl (egress resolver)");
    m_resolver_socket = std::move(socket);
    m_resolver_watched = true;
}

void Egress::add_name_server(UniqueFd socket)
{
    m_resolver->add_name_server(std::move(socket));
}

void Egress::watch_resolver(bool want)
{
    epoll_event ev{};
    ev.events = want ? uint32_t{EPOLLIN} : 0U;
    ev.data.u64 = kResolverSocketToken;
    if (::epoll_ctl(m_epoll.get(), EPOLL_CTL_MOD, m_resolver_socket.get(), &ev) == 0)
        m_resolver_watched = want;
}

void Egress::count_dropped_questions(bool at_end)
{
    if (at_end) {
        // Security: bounded by the socket's queue and kMaxUnreadAtEnd; read whole (MSG_TRUNC)
        // into one byte, never parsed.
        char byte;
        for (int i = 0; i < kMaxUnreadAtEnd; ++i) {
            if (::recv(m_resolver_socket.get(), &byte, 1, MSG_DONTWAIT | MSG_TRUNC) >= 0)
                ++m_questions_dropped;
            else if (errno != EINTR)
                break;
        }
    }
    // sk_drops: every datagram the socket's queue refused, as a 32-bit count that wraps.
    uint32_t meminfo[SK_MEMINFO_VARS] = {};
    socklen_t len = sizeof meminfo;
    if (::getsockopt(m_resolver_socket.get(), SOL_SOCKET, SO_MEMINFO, meminfo, &len) < 0 ||
        len <= SK_MEMINFO_DROPS * sizeof(uint32_t))
        return;
    m_questions_dropped += static_cast<uint32_t>(meminfo[SK_MEMINFO_DROPS] - m_kernel_drops);
    m_kernel_drops = meminfo[SK_MEMINFO_DROPS];
}

void Egress::on_resolver_socket()
{
    for (int i = 0; i < kQuestionsPerWake; ++i) {
        // Security: past the rate, the questions wait unread until the tick (Egress).
        const Clock::time_point now = Clock::now();
        if (!m_questions.ready(now)) {
            watch_resolver(false);
            return;
        }
        char packet[kMaxQuestion];
        sockaddr_storage from{};
        socklen_t from_len = sizeof from;
        ssize_t n = ::recvfrom(m_resolver_socket.get(), packet, sizeof packet, MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&from), &from_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return;  // EAGAIN: all answered (the next question wakes the loop again)
        m_questions.take(now);
        const std::string reply = answer_question(std::string_view(packet, static_cast<size_t>(n)));
        if (!reply.empty())
            (void)::sendto(m_resolver_socket.get(), reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                           reinterpret_cast<const sockaddr*>(&from), from_len);
    }
}

std::string Egress::answer_question(std::string_view packet)
{
    DnsQuestion q;
    switch (parse_dns_query(packet, q)) {
    case DnsParse::Drop:
        return "";
    case DnsParse::FormErr:
        return dns_answer(packet, q, DnsRcode::FormErr);
    case DnsParse::NotImp:
        return dns_answer(packet, q, DnsRcode::NotImp);
    case DnsParse::Ok:
        break;
    }
    const bool admitted = valid_name(q.name) && m_policy.answers_name(q.name);
    std::string refused;
    std::optional<in_addr> address;
    if (!admitted)
        refused = (q.name.empty() ? std::string("the root") : q.name) + " is not on the allowlist";
    else if (q.type == kDnsTypeA && q.klass == kDnsClassIn && !(address = m_names.address_for(q.name)))
        refused = "more than " + std::to_string(SyntheticNames::kMaxNames) + " names asked for";
    if (!refused.empty() && q.type != kDnsTypeAaaa) {
        // One line per refused question (the AAAA twin of an A question is not logged again).
        Client c;
        c.request.host = q.name;
        c.request.port = 53;
        c.via = "dns";
        c.started = Clock::now();
        ++m_tally.at(c.key(), true).of(EgressResult::Refused);
        log_line(c, EgressResult::Refused, refused, 0, 0);
    }
    if (!admitted)
        return dns_answer(packet, q, DnsRcode::NxDomain);
    if (!refused.empty())
        return dns_answer(packet, q, DnsRcode::ServFail);
    // An admitted name: its address for A, an empty answer for AAAA and every other type (the
    // client then uses the IPv4 address).
    return dns_answer(packet, q, DnsRcode::NoError, address, kTtlSeconds);
}

void Egress::start_transparent(Client& c)
{
    c.via = "transparent";
    c.request.connect = true;
    sockaddr_in local{};
    socklen_t len = sizeof local;
    if (::getsockname(c.fd.get(), reinterpret_cast<sockaddr*>(&local), &len) < 0 || local.sin_family != AF_INET) {
        refuse(c, 0, EgressResult::Refused, "the connection's own address is unknown");
        return;
    }
    c.request.port = ntohs(local.sin_port);
    const std::string* name = m_names.name_at(local.sin_addr);
    if (!name) {
        char text[INET_ADDRSTRLEN] = "?";
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
        c.request.host = text;
        refuse(c, 0, EgressResult::Refused,
               std::string("the address ") + text + " stands for no name the resolver gave out");
        return;
    }
    c.request.host = *name;
    decide(c);
}

}  // namespace cocoon::relay
