// libFuzzer target: the transparent resolver's question parser and answer builder (relay/dns.cc),
// which read every datagram the sandbox sends to 127.0.0.1:53. Each call must stay within its
// input; a question it accepts must end inside the packet with a name of at most 253 bytes, and
// its answer must echo exactly the question's bytes after a 12-byte header; every answer starts
// with the query's id and has QR set.
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "relay/dns.h"

using namespace cocoon::relay;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view packet(reinterpret_cast<const char*>(data), size);
    DnsQuestion q;
    const DnsParse result = parse_dns_query(packet, q);
    if (result == DnsParse::Drop)
        return 0;
    std::string answer;
    if (result == DnsParse::Ok) {
        if (q.end > size || q.end <= kDnsHeader || q.name.size() > 253)
            __builtin_trap();
        answer = dns_answer(packet, q, DnsRcode::NoError, in_addr{htonl(0x7f100001)}, 60);
        if (answer.size() != q.end + 16 ||
            answer.compare(kDnsHeader, q.end - kDnsHeader, packet, kDnsHeader, q.end - kDnsHeader) != 0)
            __builtin_trap();
    } else {
        answer = dns_answer(packet, q, result == DnsParse::FormErr ? DnsRcode::FormErr : DnsRcode::NotImp);
        if (answer.size() != kDnsHeader)
            __builtin_trap();
    }
    if (answer.compare(0, 2, packet, 0, 2) != 0 || !(static_cast<uint8_t>(answer[2]) & 0x80))
        __builtin_trap();
    SyntheticNames names;
    if (auto address = names.address_for(q.name);
        !address || !names.name_at(*address) || *names.name_at(*address) != q.name)
        __builtin_trap();
    return 0;
}
