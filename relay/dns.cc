// The DNS questions, answers and synthetic addresses of --egress's transparent half (dns.h).
// Security: every read is checked against the packet's size first; nothing past the question is
// read; the answer is built from the parsed fields and the question's own bytes.
// Runs in: worker.
#include "relay/dns.h"

#include <arpa/inet.h>

#include "relay/egress_policy.h"

namespace cocoon::relay {

namespace {

uint16_t read16(std::string_view packet, size_t at)
{
    return static_cast<uint16_t>((static_cast<uint8_t>(packet[at]) << 8) | static_cast<uint8_t>(packet[at + 1]));
}

void put16(std::string& out, uint16_t value)
{
    out.push_back(static_cast<char>(value >> 8));
    out.push_back(static_cast<char>(value & 0xff));
}

void put32(std::string& out, uint32_t value)
{
    put16(out, static_cast<uint16_t>(value >> 16));
    put16(out, static_cast<uint16_t>(value & 0xffff));
}

constexpr uint16_t kFlagResponse = 0x8000;
constexpr uint16_t kFlagRecursionDesired = 0x0100;
constexpr uint16_t kFlagRecursionAvailable = 0x0080;
constexpr unsigned kOpcodeShift = 11;

// The question's name, from `at`: labels of 1 to 63 bytes up to the empty one. False for a
// pointer, a reserved label type, a name past kMaxWireName or past the packet.
bool read_name(std::string_view packet, size_t& at, std::string& name)
{
    size_t wire = 0;
    for (;;) {
        if (at >= packet.size())
            return false;
        const auto length = static_cast<uint8_t>(packet[at]);
        wire += 1 + length;
        if ((length & 0xc0) != 0 || wire > kMaxWireName || packet.size() - at - 1 < length)
            return false;
        ++at;
        if (length == 0)
            return true;
        if (!name.empty())
            name += '.';
        name.append(packet.substr(at, length));
        at += length;
    }
}

}  // namespace

DnsParse parse_dns_query(std::string_view packet, DnsQuestion& question)
{
    if (packet.size() < kDnsHeader)
        return DnsParse::Drop;
    const uint16_t flags = read16(packet, 2);
    if (flags & kFlagResponse)
        return DnsParse::Drop;
    question.id = read16(packet, 0);
    question.recursion_desired = (flags & kFlagRecursionDesired) != 0;
    if (((flags >> kOpcodeShift) & 0xf) != 0)
        return DnsParse::NotImp;
    if (read16(packet, 4) != 1)
        return DnsParse::FormErr;
    size_t at = kDnsHeader;
    std::string name;
    if (!read_name(packet, at, name) || packet.size() - at < 4)
        return DnsParse::FormErr;
    question.name = lower_case(name);
    question.type = read16(packet, at);
    question.klass = read16(packet, at + 2);
    question.end = at + 4;
    return DnsParse::Ok;
}

std::string dns_answer(std::string_view packet, const DnsQuestion& question, DnsRcode rcode,
                       std::optional<in_addr> address, uint32_t ttl)
{
    const bool echo = rcode != DnsRcode::FormErr && rcode != DnsRcode::NotImp && question.end > kDnsHeader &&
                      question.end <= packet.size();
    std::string out;
    out.reserve(kDnsHeader + (echo ? question.end - kDnsHeader : 0) + 16);
    put16(out, question.id);
    uint16_t flags = kFlagResponse | kFlagRecursionAvailable | static_cast<uint16_t>(rcode);
    if (question.recursion_desired)
        flags |= kFlagRecursionDesired;
    put16(out, flags);
    put16(out, echo ? 1 : 0);  // questions
    put16(out, echo && address ? 1 : 0);  // answers
    put16(out, 0);  // authority
    put16(out, 0);  // additional
    if (!echo)
        return out;
    out.append(packet.substr(kDnsHeader, question.end - kDnsHeader));
    if (address) {
        put16(out, 0xc000 | kDnsHeader);  // the name: a pointer to the question's
        put16(out, kDnsTypeA);
        put16(out, kDnsClassIn);
        put32(out, ttl);
        put16(out, 4);
        out.append(reinterpret_cast<const char*>(&address->s_addr), 4);  // network order already
    }
    return out;
}

std::optional<in_addr> SyntheticNames::address_for(const std::string& name)
{
    auto it = m_index.find(name);
    size_t index = 0;
    if (it != m_index.end()) {
        index = it->second;
    } else {
        if (m_names.size() >= kMaxNames)
            return std::nullopt;
        index = m_names.size();
        m_names.push_back(name);
        m_index.emplace(name, static_cast<uint32_t>(index));
    }
    // 127.16.X.Y, Y in 1..254.
    const uint32_t host =
        (127U << 24) | (16U << 16) | (static_cast<uint32_t>(index / 254) << 8) | static_cast<uint32_t>(index % 254 + 1);
    return in_addr{htonl(host)};
}

const std::string* SyntheticNames::name_at(in_addr address) const
{
    const uint32_t host = ntohl(address.s_addr);
    if ((host >> 16) != ((127U << 8) | 16U))
        return nullptr;
    const uint32_t high = (host >> 8) & 0xff, low = host & 0xff;
    if (low == 0 || low == 255)
        return nullptr;
    const size_t index = high * 254 + (low - 1);
    return index < m_names.size() ? &m_names[index] : nullptr;
}

}  // namespace cocoon::relay
