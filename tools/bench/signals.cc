// Signal delivery latency benchmark: the time from kill(SIGUSR1) to the
// agent's handler running, through `cocoon --forward-signals` and directly.
// Standalone (compiled by tools/bench/signals); runs as whoever runs it.
//
//   signals_bench agent                      the agent: prints "R", then one "S" per SIGUSR1
//   signals_bench drive N LABEL CMD ARGS...  runs CMD (which must run the agent), signals
//                                            the CMD process N times, prints the latencies
// Runs in: dev.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_pending = 0;

void on_usr1(int)
{
    g_pending = 1;
}

int agent()
{
    struct sigaction sa {};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, nullptr);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    if (write(1, "R", 1) != 1)
        return 1;
    for (;;) {
        while (!g_pending)
            sigsuspend(&old);
        g_pending = 0;
        if (write(1, "S", 1) != 1)
            return 0;
    }
}

double now_us()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int drive(int n, const char* label, char** cmd)
{
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        execv(cmd[0], cmd);
        _exit(127);
    }
    close(out[1]);
    char c;
    if (read(out[0], &c, 1) != 1 || c != 'R') {
        fprintf(stderr, "%s: agent did not start\n", label);
        return 1;
    }
    std::vector<double> lat;
    for (int i = 0; i < n; ++i) {
        double t0 = now_us();
        kill(pid, SIGUSR1);
        if (read(out[0], &c, 1) != 1) {
            fprintf(stderr, "%s: agent gone after %d signals\n", label, i);
            return 1;
        }
        lat.push_back(now_us() - t0);
        usleep(200);  // one signal in flight at a time
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double p) { return lat[std::min(lat.size() - 1, static_cast<size_t>(p * lat.size()))]; };
    printf("latency_us %-10s median %8.1f p99 %8.1f n %d\n", label, pct(0.5), pct(0.99), n);
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc >= 2 && std::strcmp(argv[1], "agent") == 0)
        return agent();
    if (argc >= 5 && std::strcmp(argv[1], "drive") == 0)
        return drive(std::atoi(argv[2]), argv[3], argv + 4);
    fprintf(stderr, "usage: %s agent | drive N LABEL CMD [ARGS...]\n", argv[0]);
    return 2;
}
