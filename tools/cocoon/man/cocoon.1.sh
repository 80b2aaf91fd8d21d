#!/bin/sh
# Writes the man page cocoon.1 from the option table of the cocoon binary
# given as $1 (its --help), so the page lists exactly the options the binary
# has. Run at build time (tools/CMakeLists.txt).
set -eu
bin=$1
version=$("$bin" --version | awk '{print $2}')
cat <<'HEAD'
.TH COCOON 1
.SH NAME
cocoon \- run a command in a Linux namespace sandbox (a drop-in for bwrap)
.SH SYNOPSIS
.B cocoon
[\fIOPTIONS\fR...] [\fB\-\-\fR] \fICOMMAND\fR [\fIARGS\fR...]
.br
.B bwrap
[\fIOPTIONS\fR...] [\fB\-\-\fR] \fICOMMAND\fR [\fIARGS\fR...]
.SH DESCRIPTION
cocoon runs COMMAND in a new mount namespace, on a fresh tmpfs root built from
the binds and mounts the options ask for, in command-line order, and in the
user, PID, network, IPC, UTS and cgroup namespaces the options ask for
(\fB\-\-unshare\-all\fR: all of them). As with bwrap, a caller other than root
always gets a user namespace, and its command has no capabilities unless
\fB\-\-cap\-add\fR; a root caller's command keeps root's capabilities unless
\fB\-\-cap\-drop\fR. A root caller without CAP_SYS_ADMIN (a container's root)
is taken as one other than root (see INSIDE A CONTAINER). no_new_privs is
always set, and a default seccomp policy is loaded unless
\fB\-\-no\-default\-seccomp\fR.
It accepts the command line of bubblewrap (bwrap); installed or linked as
\fBbwrap\fR, its messages start with "bwrap: ". Errors are one line; the exit
status is the command's, 128+N if signal N ended it, and 1 if the sandbox
could not be set up.
.PP
As with bwrap, each file descriptor above 2 that the caller left open without
close-on-exec, and that no option names, reaches COMMAND at the same number
(a socket or pipe handed over on purpose); cocoon and the sandbox's PID 1 keep
no copy. \fB\-\-close\-fds\fR closes them instead. An fd that an option
names is that option's: only \fB\-\-sync\-fd\fR with \fB\-\-as\-pid\-1\fR
reaches COMMAND. No descriptor of cocoon's own ever does.
.SH OPTIONS
HEAD
# Each "    --name ARGS   help" line becomes a tagged paragraph; the line
# "cocoon's own options ..." starts the extensions' section.
"$bin" --help | awk '
    /^cocoon.s own options/ { print ".SH COCOON EXTENSIONS"; print "Options bwrap does not have."; next }
    /^    --/ {
        line = substr($0, 5)
        split(line, parts, /  +/)
        name = parts[1]; help = parts[2]
        gsub(/-/, "\\-", name); gsub(/-/, "\\-", help)
        n = split(name, words, " ")
        printf ".TP\n\\fB%s\\fR", words[1]
        for (i = 2; i <= n; i++) printf " \\fI%s\\fR", words[i]
        printf "\n%s\n", help
    }'
cat <<TAIL
.SH AGENT PROFILES
\fB\-\-agent\fR \fIPROFILE\fR puts, where it stands on the command line, the
options of a profile: the hardened layout for an AI coding agent (every
namespace, a stop that reaches the agent and leaves nothing, no inherited fd
or variable of the caller's, the system read\-only, a fresh /tmp and home,
the worktree read\-write with its .git read\-only, the agent's login file,
and egress through cocoon's proxy to the agent's hosts only). Options after it
add to it or override it as they would after the same options typed out:
\fB\-\-egress\-allow\fR adds a host, \fB\-\-bind\fR a path.
\fB\-\-dry\-run\fR prints the whole command line that would run, one
option per line and ready to paste into sh, and exits 0 without making a
sandbox. Built in: \fBclaude\fR, \fBcodex\fR, \fBgemini\fR,
\fBopencode\fR and \fBgeneric\fR (the layout with no login file and no
host). A root caller must add \fB\-\-host\-user\fR \fIUSER\fR, a user
made for the agent, so that the agent never acts as root on the host.
.PP
The worktree is the current directory, or \fB\-\-worktree\fR \fIDIR\fR,
made canonical; one that is the caller's home, or holds it, or is /, is
refused. With \fB\-\-relay\fR \fIPORT SOCKET\fR (the caller's own proxy),
the profile's \fB\-\-egress\fR, \fB\-\-egress\-allow\fR and
\fB\-\-proxy\-env\fR are left out, and \fB\-\-proxy\-env\fR names the first
relay's port unless the command line gives its own.
.PP
A profile is a file of options, one per line, written as on the command line.
Spaces and tabs split a line into words; a quote (' or ", either one closes
what either opened) keeps spaces in a word, and a backslash escapes a quote, a
space or a backslash (Boost.Program_options' split_unix). An empty word cannot be
written, and a quote left open is refused. A line starting with # is a comment, and
\fBinclude\fR \fINAME\fR reads another profile there (a name, or a path:
relative to the including file; at most 8 deep, never itself). Two names
expand: \fB\$HOME\fR, the caller's home (\$HOME when absolute, else its
passwd entry's), and \fB\$WORKTREE\fR; any other \$NAME is refused, so a
profile means the same in every environment. \fB\-\-agent\fR,
\fB\-\-worktree\fR, \fB\-\-args\fR, \fB\-\-dry\-run\fR and the
options that only print are refused in a profile. A \fIPROFILE\fR with a /
is a path; a name is looked for as \fINAME\fR.profile in
\$XDG_CONFIG_HOME/cocoon/profiles (else ~/.config/cocoon/profiles), then in
share/cocoon/profiles beside cocoon's binary (the installed ones). A profile
in the worktree, which the agent may write, is never read. A profile
that is not a regular file, larger than 64 KiB, names an unknown option or
gives an option the wrong number of arguments is refused in one line naming
the file and line.
.SH RELAY LIMITS
The connections of \fB\-\-relay\fR and \fB\-\-egress\fR are relayed by
cocoon's relay worker, a confined process outside the sandbox, with two file
descriptors each. It relays at most (N \- 99) / 2 at once, N being its
RLIMIT_NOFILE (under \fB\-\-relay\fR the hard limit: cocoon raises its soft
limit to it): 462 under a limit of 1024, 262094 under 524288. Past that the listeners stop accepting and new clients
wait in the listen backlog until a connection closes. Each relayed TCP socket
has SO_SNDBUF and SO_RCVBUF of 256 KiB, which the kernel doubles, and each
Unix socket to the host a SO_SNDBUF of 512 KiB: a connection whose reader
never reads holds at most 1 MiB of TCP and 1 MiB of Unix socket memory, and
the bytes the relay itself holds are at most 64 MiB over all connections.
.SH TRANSPARENT EGRESS
A client that ignores the proxy variables (Node before 22.21, ssh, git over
SSH, a program that opens its own sockets) reaches the same hosts through
\fB\-\-egress\fR without them. Inside, cocoon answers DNS on 127.0.0.1:53,
and the sandbox's /etc/resolv.conf, where its root has one, is replaced by one
that names it (a root without one makes the C library ask there anyway). Each
name that an \fB\-\-egress\-allow\fR name rule admits gets an address of its
own in 127.16.0.0/16, the same for the whole run; every other name is
NXDOMAIN; AAAA questions get an empty answer. cocoon listens on every port
the name rules allow (443 and 80 for a rule without a port), on all the
sandbox's loopback addresses, except \fB\-\-egress\fR's and the
\fB\-\-relay\fR ports; a connection there to one of those addresses goes to
the real name and port, resolved and checked on the host as a CONNECT is,
and is logged the same way with \fBvia\fR "transparent". A connection to
an address no name was given, on a port a rule allows, is closed and logged
as refused. One on a port no rule allows (to an admitted name's address too:
\fBcurl https://NAME:8443/\fR) is reset by the kernel inside the sandbox, and the
egress log never sees it: nothing listens on that port, and
cocoon cannot listen on every port (a listener each) nor steer them all to one
(a BPF program a caller without privilege cannot load). Limits: a client with a hard-coded IP address, or with
its own DNS server, reaches nothing; the sandbox cannot listen on those ports
itself; UDP other than DNS (QUIC) goes nowhere.
.SH EGRESS LOG
\fB\-\-egress\-log\fR writes one JSON line per \fB\-\-egress\fR connection
that reaches cocoon (not a transparent one on a port no rule allows: see
TRANSPARENT EGRESS), when its outcome is known: a refusal at once, a relayed connection when it
ends. Its \fBtime\fR is when the line was written, so the lines are in the
order of \fBtime\fR (unless the host's clock is set back); \fBtime\fR less
\fBduration\-ms\fR is when the connection was accepted. Its \fBresult\fR is
exactly one of \fBallowed\fR (relayed), \fBrefused\fR (the allowlist, the
address rules or a bound said no, or the request was malformed or late),
\fBunresolved\fR (the name did not resolve) and \fBunreachable\fR (allowed,
but every connect failed); \fBreason\fR says why in words. \fBvia\fR is
"transparent" for a connection that came without the proxy, "dns" for a name
the resolver refused (port 53), and absent for the proxy's. The last line is a
summary of each host and port, and of the results in all. docs/options.md
lists every field.
.PP
Against a flood, the lines of refusals (of the proxy, of transparent
connections and of DNS questions alike) share one bound: the first 2,000,
then 200 a second; past it a refusal is counted in the summary's
\fBnot\-written\fR and gets no line. The resolver answers at most 2,000
questions a second; the others wait unread or are dropped by the kernel,
and the summary's \fBquestions\-dropped\fR counts them. A run writes at
most 64 MiB to the log, the summary included: at the cap one line
(\fBcapped\-at\-bytes\fR) says so, every later line is only counted in
\fBnot\-written\fR, and the summary still comes last.
.SH LOGIN FILES
\fB\-\-login\-file\fR \fISRC DEST\fR copies the host file SRC (a regular file of the
caller's, with one link, at most 1 MiB) to DEST, in a tmpfs of its own, and saves each whole
version the command leaves at DEST back to SRC (a temp file renamed over it), while the sandbox
runs and at its end; a version another sandbox saved to SRC replaces an unchanged DEST.
.PP
\fB\-\-login\-file\-try\fR does the same, but SRC may be missing: DEST then starts absent,
and the first version the command writes there makes SRC (mode 0600) and the missing directories
of its path (mode 0700, one at a time, none through a link under
\fB\-\-no\-follow\-sources\fR). Nothing is made before that first save: a run that fails, or
writes no DEST, leaves nothing on the host. An SRC that exists is checked as under
\fB\-\-login\-file\fR.
.SH DEFAULT SECCOMP POLICY
Before the command runs, cocoon loads a seccomp filter that refuses what no
agent needs and what has been a way out of a sandbox or a way to reach the
host; the filters of \fB\-\-seccomp\fR and \fB\-\-add\-seccomp\-fd\fR
stack on it. It refuses with EPERM: the keyring calls (keyctl, add_key,
request_key), kernel modules and kexec, bpf, perf_event_open, userfaultfd,
io_uring, acct, swapon and swapoff, reboot, open_by_handle_at, syslog,
quotactl and obsolete calls; the terminal ioctls TIOCSTI and TIOCLINUX (input
injected into the caller's terminal), TIOCSETD, TIOCEXCL, TCXONC, TIOCCONS,
TIOCSLCKTRMIOS, TIOCVHANGUP and the virtual console's KD* and VT_* requests
(the caller's terminal left broken); AF_VSOCK sockets (the hypervisor);
setting the setuid or setgid bit (chmod, creat, mknod, open with O_CREAT), and
setxattr with the value sizes of a security.capability attribute (file
capabilities a root caller's host would honour); personas other than Linux's.
openat2 and setxattrat answer ENOSYS, as on an older kernel, since a filter
cannot read their flags: programs fall back to openat and setxattr. 32-bit
x86 calls are filtered the same way; x32 calls answer ENOSYS. A program that
fails on one of these (a debugger that wants perf_event_open, a tool that
needs io_uring) runs with \fB\-\-no\-default\-seccomp\fR, which loads none of
it; bwrap has no such policy. SECURITY.md gives each rule's reason.
.SH INSIDE A CONTAINER
A container's root (Docker's, Podman's, a Kubernetes pod's, unless
privileged) lacks CAP_SYS_ADMIN and can make no namespace but a user
namespace. cocoon looks at the caller's effective capabilities, not its uid:
a root caller without CAP_SYS_ADMIN gets a user namespace of its own without
asking, its uid 0 mapped to itself, and its command has no capabilities
unless \fB\-\-cap\-add\fR (bwrap fails there unless asked for a user
namespace, and then keeps root's capabilities). Mapping uid 0 needs
CAP_SETFCAP, and \fB\-\-host\-user\fR needs CAP_SETUID and CAP_SETGID; a
runtime that drops them is told so in one line. The sandbox's uid 0 is still
this root's on every file it reaches.
.PP
A runtime also masks paths of the container's /proc, and Linux then refuses a
new proc in a user namespace: \fB\-\-proc\fR with a PID namespace fails
with one line that names a masked path and the fix (Podman:
\-\-security\-opt unmask=ALL; Docker: \-\-security\-opt
systempaths=unconfined; Kubernetes: securityContext.procMount: Unmasked), or
leave out \fB\-\-proc\fR. A runtime's default seccomp profile refuses
sethostname, which \fB\-\-hostname\fR needs (and the agent profiles set):
that line says so too. \fB\-\-check\fR says which mode it runs in,
tries the same proc mount, names what refused each call it could not make
(a kernel without it, a seccomp filter, a missing capability or an LSM
policy), and ends with what to change.
.SH EXIT STATUS
The command's exit status when it exits; 128+N when signal N ends it
(\fB\-\-json\-status\-fd\fR's exit\-signal says which); 1 when the
sandbox could not be set up or the command line is wrong (one line on stderr names the option or path; as
\fBbwrap\fR with no command, the usage). \fB\-\-kill\-after\fR's SIGKILL
counts as the signal: 137. \fB\-\-help\fR, \fB\-\-version\fR and
\fB\-\-check\fR exit 0 (\fB\-\-check\fR: 1 when this host cannot run a
default sandbox).
.SH FILES
.TP
.I /etc/apparmor.d/cocoon
lets cocoon create user namespaces where AppArmor restricts them.
.TP
.I PREFIX/share/cocoon/profiles/*.profile
the built\-in profiles of \fB\-\-agent\fR.
.TP
.I ~/.config/cocoon/profiles/*.profile
the user's own profiles, found first.
.SH SEE ALSO
.BR bwrap (1),
.BR user_namespaces (7),
.BR namespaces (7).
In the source of cocoon $version: README.md gives the agent recipe;
docs/options.md describes each option in full (limits, messages, how a sandbox
stops, capabilities); docs/agents.md the recipe part by part;
docs/bwrap-differences.md the deliberate differences from bwrap; SECURITY.md
the threat model.
TAIL
