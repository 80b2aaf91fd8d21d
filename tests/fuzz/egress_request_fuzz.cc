// libFuzzer target: --egress's request parser, allowlist patterns and policy (relay/egress.cc,
// egress_policy.cc) and the log's JSON text (egress_log.cc), which read what the sandbox sends to
// the proxy. Each call must stay within its input; a head it accepts must end inside it, name a
// host of at most 253 bytes that the address and name checks can take, and, for plain HTTP, a
// forwarded head that ends with "Connection: close"; a refused head leaves the request untouched; every JSON
// string is printable ASCII.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/sys_error.h"
#include "relay/egress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    cocoon::relay::ProxyRequest request;
    size_t head = 0;
    std::string why;
    const cocoon::relay::ParseResult result = cocoon::relay::parse_proxy_request(bytes, request, head, why);
    if (result == cocoon::relay::ParseResult::Ok) {
        if (head > size || request.port == 0 || request.host.empty() || request.host.size() > 253)
            __builtin_trap();
        if (!request.connect) {
            const std::string_view fwd = request.forward;
            if (!fwd.ends_with("\r\nConnection: close\r\n\r\n"))
                __builtin_trap();
        }
        cocoon::relay::EgressPolicy policy({cocoon::relay::parse_allow_rule("*.example.com")},
                                           {*cocoon::relay::parse_ip_literal("198.51.100.7", 0)});
        (void)policy.check_name(request.host, request.port);
        if (auto address = cocoon::relay::parse_ip_literal(request.host, request.port)) {
            (void)policy.check_literal(request.host, *address, request.port);
            std::string refused;
            (void)policy.admit(request.host, {*address}, request.port, refused);
        }
    } else if (result == cocoon::relay::ParseResult::Bad && !request.host.empty()) {
        __builtin_trap();
    }
    for (char c : cocoon::relay::json_string(bytes.substr(0, 512)))
        if (c < 0x20 || c >= 0x7f)
            __builtin_trap();
    try {
        (void)cocoon::relay::parse_allow_rule(std::string(bytes.substr(0, 300)));
    } catch (const cocoon::UsageError&) {
    }
    return 0;
}
