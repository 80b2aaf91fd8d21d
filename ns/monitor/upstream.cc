// The monitor's upstream decisions and name-server sockets (ns/monitor/upstream.h).
// Runs in: monitor.
#include "ns/monitor/upstream.h"

#include <ares.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace cocoon::ns {
namespace {

namespace wire = relay::wire;
using relay::address_text;
using relay::internal_address_class;
using relay::lower_case;
using relay::valid_name;

// The host's own addresses are read again at most this often (an interface may come up later).
constexpr std::chrono::seconds kOwnAddressesMaxAge{1};

socklen_t address_size(const sockaddr_storage& address)
{
    return address.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

}  // namespace

std::vector<sockaddr_storage> host_addresses()
{
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) < 0)
        return {};
    std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owned(list, &::freeifaddrs);
    std::vector<sockaddr_storage> own;
    for (const ifaddrs* each = list; each; each = each->ifa_next) {
        if (!each->ifa_addr || (each->ifa_addr->sa_family != AF_INET && each->ifa_addr->sa_family != AF_INET6))
            continue;
        sockaddr_storage address{};
        std::memcpy(&address, each->ifa_addr,
                    each->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
        own.push_back(address);
    }
    return own;
}

UpstreamAnswer UpstreamGate::decide(const wire::Request& request, std::string& malformed)
{
    UpstreamAnswer answer;
    sockaddr_storage address{};
    if (request.family == AF_INET) {
        auto& in4 = reinterpret_cast<sockaddr_in&>(address);
        in4.sin_family = AF_INET;
        in4.sin_port = htons(request.port);
        std::memcpy(&in4.sin_addr, request.address, sizeof in4.sin_addr);
    } else if (request.family == AF_INET6) {
        auto& in6 = reinterpret_cast<sockaddr_in6&>(address);
        in6.sin6_family = AF_INET6;
        in6.sin6_port = htons(request.port);
        std::memcpy(&in6.sin6_addr, request.address, sizeof in6.sin6_addr);
    } else {
        malformed = "an upstream request of address family " + std::to_string(request.family);
        return answer;
    }
    if (request.name_size > sizeof request.name) {
        malformed = "an upstream request with a name of " + std::to_string(request.name_size) + " bytes";
        return answer;
    }
    const std::string name(request.name, request.name_size);
    if (!name.empty() && (!valid_name(name) || name != lower_case(name))) {
        malformed = "an upstream request for a name that is not one";
        return answer;
    }
    const auto now = std::chrono::steady_clock::now();
    if (m_own_read == std::chrono::steady_clock::time_point{} || now - m_own_read >= kOwnAddressesMaxAge) {
        m_own_read = now;
        if (std::vector<sockaddr_storage> own = host_addresses(); !own.empty())
            m_policy.set_own_addresses(std::move(own));  // else the addresses read before stay
    }
    answer.err = EACCES;
    if (name.empty()) {
        if (!m_policy.check_literal(address_text(address), address, request.port).empty()) {
            answer.refusal = wire::kNotListed;
            return answer;
        }
    } else {
        if (!m_policy.check_name(name, request.port).empty()) {
            answer.refusal = wire::kNotListed;
            return answer;
        }
        std::string refused;
        if (m_policy.admit(name, {address}, request.port, refused).empty()) {
            answer.refusal = internal_address_class(address).empty() ? wire::kOwnAddress : wire::kInternal;
            return answer;
        }
    }
    answer.err = 0;
    UniqueFd socket(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!socket) {
        answer.err = errno;
        return answer;
    }
    if (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), address_size(address)) < 0 &&
        errno != EINPROGRESS) {
        answer.err = errno;
        return answer;
    }
    answer.socket = std::move(socket);
    return answer;
}

std::vector<UniqueFd> name_server_sockets(std::string& error)
{
    // c-ares reads the host's /etc/resolv.conf here (a file of the host's, not the sandbox's) and
    // says which servers it names; it sends nothing.
    std::vector<UniqueFd> sockets;
    if (int rc = ares_library_init(ARES_LIB_INIT_ALL); rc != ARES_SUCCESS) {
        error = std::string("c-ares: ") + ares_strerror(rc);
        return sockets;
    }
    ares_channel channel = nullptr;
    ares_addr_port_node* servers = nullptr;
    int rc = ares_init(&channel);
    if (rc == ARES_SUCCESS)
        rc = ares_get_servers_ports(channel, &servers);
    if (rc != ARES_SUCCESS)
        error = std::string("c-ares: ") + ares_strerror(rc);
    for (const ares_addr_port_node* each = servers; each && sockets.size() < wire::kMaxNameServers; each = each->next) {
        sockaddr_storage address{};
        const uint16_t port = htons(static_cast<uint16_t>(each->udp_port != 0 ? each->udp_port : 53));
        if (each->family == AF_INET) {
            auto& in4 = reinterpret_cast<sockaddr_in&>(address);
            in4.sin_family = AF_INET;
            in4.sin_port = port;
            std::memcpy(&in4.sin_addr, &each->addr.addr4, sizeof in4.sin_addr);
        } else if (each->family == AF_INET6) {
            auto& in6 = reinterpret_cast<sockaddr_in6&>(address);
            in6.sin6_family = AF_INET6;
            in6.sin6_port = port;
            std::memcpy(&in6.sin6_addr, &each->addr.addr6, sizeof in6.sin6_addr);
        } else {
            continue;
        }
        UniqueFd socket(::socket(address.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!socket ||
            ::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), address_size(address)) < 0) {
            error = "can't reach the name server " + address_text(address) + ": " + std::strerror(errno);
            continue;
        }
        sockets.push_back(std::move(socket));
    }
    if (servers)
        ares_free_data(servers);
    if (channel)
        ares_destroy(channel);
    ares_library_cleanup();
    return sockets;
}

}  // namespace cocoon::ns
