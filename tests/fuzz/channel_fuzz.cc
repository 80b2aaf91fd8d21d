// libFuzzer target: the setup channel's decoder (ns/channel.cc decode_message), which the monitor
// runs on datagrams from the sandbox's first process: hostile input once the command could reach
// the channel. ProtocolError is the expected refusal; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ns/channel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    for (bool truncated : {false, true}) {
        try {
            (void)cocoon::ns::decode_message(bytes, {}, truncated);
        } catch (const cocoon::ns::ProtocolError&) {
        }
    }
    return 0;
}
