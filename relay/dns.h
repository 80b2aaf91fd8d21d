// --egress's transparent half, its pure parts: the DNS questions the sandbox asks its resolver
// at 127.0.0.1:53, the answers, and the synthetic addresses that stand for the names the
// allowlist admits. No system calls; unit-tested and fuzzed. Runs in the confined relay worker.
//
// How a client that ignores the proxy variables gets out: it asks for a name (its resolv.conf
// inside names 127.0.0.1); an admitted name gets an address of its own in 127.16.0.0/16, stable
// for the run, every other name NXDOMAIN; the client connects to that address on the port it
// wants, where a listener of cocoon's takes it (one per allowed port, on every address of the
// sandbox's loopback); the address says which name was meant, and from there it is an --egress
// CONNECT (relay/egress.h). Security: the answers carry only what cocoon made (the question is
// echoed, and checked first), never a real address; the map of names is capped.
// Runs in: worker.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cocoon::relay {

constexpr uint16_t kDnsTypeA = 1;
constexpr uint16_t kDnsTypeAaaa = 28;
constexpr uint16_t kDnsClassIn = 1;
constexpr size_t kDnsHeader = 12;
// A name on the wire is at most 255 bytes (RFC 1035 2.3.4).
constexpr size_t kMaxWireName = 255;

enum class DnsRcode : uint8_t { NoError = 0, FormErr = 1, ServFail = 2, NxDomain = 3, NotImp = 4 };

// One question, as parsed from a query.
struct DnsQuestion {
    uint16_t id = 0;
    bool recursion_desired = false;
    std::string name;  // lower case, labels joined by '.', no trailing dot; empty: the root
    uint16_t type = 0;
    uint16_t klass = 0;
    size_t end = 0;  // the offset just past the question in the packet
};

enum class DnsParse {
    Drop,  // no answer: shorter than a header, or not a query (QR set)
    FormErr,  // answer FORMERR: not exactly one question, or a question that does not parse
    NotImp,  // answer NOTIMP: an opcode other than QUERY
    Ok,
};

// Reads the header and the one question of `packet`. Looks at nothing past the question (an
// EDNS record in the additional section is ignored). Labels that are not a valid_name's give a
// name that no rule admits (then NXDOMAIN), never FORMERR, except for a compression pointer or a
// reserved label type, which a question never needs.
DnsParse parse_dns_query(std::string_view packet, DnsQuestion& question);

// The answer to `question` of `packet`: the header (id, RD as asked, RA, `rcode`), the question
// echoed, and, when `address` is given, one A record for it with `ttl`. For FormErr and NotImp,
// a header alone (with the id, when the packet has one).
std::string dns_answer(std::string_view packet, const DnsQuestion& question, DnsRcode rcode,
                       std::optional<in_addr> address = std::nullopt, uint32_t ttl = 0);

// The synthetic addresses: the first name asked for gets 127.16.0.1, the next 127.16.0.2, and so
// on (never .0 or .255 in the last byte), kMaxNames at most.
class SyntheticNames {
public:
    static constexpr size_t kMaxNames = 4096;
    // name's address, made on the first ask; nullopt once kMaxNames names have one.
    std::optional<in_addr> address_for(const std::string& name);
    // The name `address` stands for; nullptr for an address that stands for none.
    const std::string* name_at(in_addr address) const;
    size_t size() const { return m_names.size(); }

private:
    std::unordered_map<std::string, uint32_t> m_index;  // name -> its index in m_names
    std::vector<std::string> m_names;
};

}  // namespace cocoon::relay
