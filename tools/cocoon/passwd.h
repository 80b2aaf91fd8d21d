// --host-user USER[:GROUP]: the host ids a root caller's sandbox acts as.
// Resolved from the texts of the host's /etc/passwd and /etc/group; pure.
// Runs in: caller.
#pragma once

#include <sys/types.h>

#include <string>

namespace cocoon::tools {

struct HostIds {
    uid_t uid = 0;
    gid_t gid = 0;
};

// USER and GROUP are names or numbers. A name is the first entry of that name
// in the local files (passwd and group: their texts), as glibc's nss_files
// reads them; no other NSS source (LDAP, sssd) is asked, since cocoon is a
// static binary (a user from one is given by number). A number is taken as
// is. GROUP defaults to USER's primary group (its passwd entry). Throws
// UsageError naming --host-user for an unknown name, a number without a
// group to go with it, and uid 0 or gid 0.
HostIds resolve_host_user(const std::string& spec, const std::string& passwd, const std::string& group);

}  // namespace cocoon::tools
