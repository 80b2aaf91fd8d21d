// Which functions of an executable a run executes, in the order it first executes them: the
// command and every process it forks are single-stepped (ptrace) until each exits or execs
// another program, and each new instruction address is looked up in the executable's symbols
// (nm). One mangled name per line on stdout, for lld's --symbol-ordering-file.
//
// usage: steptrace EXECUTABLE ARGS...      (made by tools/order/generate; a developer's tool)
// Runs in: dev.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

struct Symbol {
    unsigned long long start, end;
    std::string name;
};

// The executable's functions, by address (a static, non-PIE executable: no load bias).
std::vector<Symbol> functions(const char* path)
{
    std::vector<Symbol> out;
    const std::string cmd = std::string("nm -n -S --defined-only '") + path + "'";
    FILE* nm = ::popen(cmd.c_str(), "r");
    if (!nm)
        return out;
    char line[8192];
    while (std::fgets(line, sizeof line, nm)) {
        unsigned long long start = 0, size = 0;
        char type = 0;
        char name[8192];
        if (std::sscanf(line, "%llx %llx %c %8191s", &start, &size, &type, name) == 4 &&
            (type == 't' || type == 'T' || type == 'w' || type == 'W'))
            out.push_back({start, start + std::max(size, 1ULL), name});
    }
    ::pclose(nm);
    return out;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s EXECUTABLE ARGS...\n", argv[0]);
        return 2;
    }
    const std::vector<Symbol> symbols = functions(argv[1]);
    if (symbols.empty()) {
        std::fprintf(stderr, "steptrace: no symbols in %s\n", argv[1]);
        return 1;
    }
    pid_t child = ::fork();
    if (child == 0) {
        ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
        ::raise(SIGSTOP);
        ::execv(argv[1], argv + 1);
        ::_exit(127);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ::ptrace(PTRACE_SETOPTIONS, child, nullptr,
             PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
    ::ptrace(PTRACE_CONT, child, nullptr, nullptr);  // to the executable's exec
    std::unordered_set<unsigned long long> seen_addresses;
    std::unordered_set<const Symbol*> seen_functions;
    bool started = false;
    for (;;) {
        pid_t pid = ::waitpid(-1, &status, __WALL);
        if (pid < 0)
            break;
        if (WIFEXITED(status) || WIFSIGNALED(status))
            continue;
        const int sig = WSTOPSIG(status), event = status >> 16;
        int deliver = 0;
        if (event == PTRACE_EVENT_EXEC) {
            if (started) {  // another program (the sandbox's command): not ours to trace
                ::ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
                continue;
            }
            started = true;
        } else if (!event && sig == SIGTRAP) {
            user_regs_struct regs{};
            if (::ptrace(PTRACE_GETREGS, pid, nullptr, &regs) == 0 && seen_addresses.insert(regs.rip).second) {
                auto it = std::upper_bound(symbols.begin(), symbols.end(), regs.rip,
                                           [](unsigned long long a, const Symbol& s) { return a < s.start; });
                if (it != symbols.begin() && regs.rip < (--it)->end && seen_functions.insert(&*it).second)
                    std::printf("%s\n", it->name.c_str());
            }
        } else if (!event && sig != SIGSTOP) {
            deliver = sig;
        }
        ::ptrace(PTRACE_SINGLESTEP, pid, nullptr, deliver);
    }
    return 0;
}
