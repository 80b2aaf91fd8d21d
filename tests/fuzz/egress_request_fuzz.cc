// libFuzzer target: --egress's request parser and allowlist patterns (relay/egress.cc), which read
// what the sandbox sends to the proxy. Each call must stay within its input; a head it accepts
// must end inside it and name a host the address and name checks can take.
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
    if (cocoon::relay::parse_proxy_request(bytes, request, head, why) == cocoon::relay::ParseResult::Ok) {
        if (head > size || request.port == 0 || request.host.empty())
            __builtin_trap();
        cocoon::relay::Allowlist list({cocoon::relay::parse_allow_rule("*.example.com")});
        (void)list.allows_name(request.host, request.port);
        if (auto address = cocoon::relay::parse_ip_literal(request.host, request.port))
            (void)cocoon::relay::internal_address_class(*address);
    }
    try {
        (void)cocoon::relay::parse_allow_rule(std::string(bytes.substr(0, 300)));
    } catch (const cocoon::UsageError&) {
    }
    return 0;
}
