# Shared by tools/run and tools/test: install what cocoon needs, then build it.
# Sourced, not run. Idempotent: installs only missing packages, rebuilds only what changed.

COCOON_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COCOON_BUILD=${COCOON_BUILD:-$COCOON_ROOT/build}

cocoon_packages=(
  cmake ninja-build g++ pkg-config lld
  libcap-dev libseccomp-dev libnl-3-dev libnl-route-3-dev libboost-program-options-dev libc-ares-dev
  googletest libgtest-dev
  util-linux procps attr bubblewrap curl socat openssl nodejs
  clang-format clang-tidy clang libclang-rt-14-dev
  dpkg-dev groff-base python3
)

cocoon_install() {
  local missing=()
  for p in "${cocoon_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "cocoon: installing ${missing[*]}" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# cocoon_build [extra cmake args...]
cocoon_build() {
  cmake -S "$COCOON_ROOT" -B "$COCOON_BUILD" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "$@" >/dev/null
  cmake --build "$COCOON_BUILD" -- --quiet
}

# The repository's root is the first thing a newcomer sees: it holds the layout and its documents,
# nothing else. Fails naming each tracked entry at the root that is not in this list (a stray
# shell redirect, a build's leftover).
cocoon_root_layout=(
  .ci .clang-format .clang-tidy .gitignore CMakeLists.txt README.md ARCHITECTURE.md SECURITY.md
  base docs mount net ns reaper relay tests tools
)
cocoon_check_tree() {
  local stray
  stray=$(git -C "$COCOON_ROOT" ls-files | awk -F/ '{print $1}' | sort -u |
    grep -vxF -f <(printf '%s\n' "${cocoon_root_layout[@]}") || true)
  [ -z "$stray" ] && return 0
  echo "tools/test: tracked at the repository's root but not in its layout (tools/common.sh):" $stray >&2
  return 1
}

# Fails naming each file that .clang-format would change.
cocoon_check_format() {
  local bad=()
  while IFS= read -r f; do
    clang-format --dry-run -Werror "$COCOON_ROOT/$f" >/dev/null 2>&1 || bad+=("$f")
  done < <(git -C "$COCOON_ROOT" ls-files '*.cc' '*.h')
  [ ${#bad[@]} -eq 0 ] && return 0
  echo "tools/test: not formatted as .clang-format says (run clang-format -i): ${bad[*]}" >&2
  return 1
}

# clang-tidy with the checks .clang-tidy names (and why), over the product's
# sources and the benchmarks; any finding fails. Needs a configured build.
cocoon_tidy() {
  local files
  mapfile -t files < <(git -C "$COCOON_ROOT" ls-files 'base/*.cc' 'mount/*.cc' 'net/*.cc' 'ns/*.cc' \
    'relay/*.cc' 'reaper/*.cc' 'tools/*.cc' | sed "s|^|$COCOON_ROOT/|")
  # -Wno-unknown-warning-option: the build's g++-only flags (-Wno-error=restrict) mean nothing to clang.
  run-clang-tidy -p "$COCOON_BUILD" -quiet -j "$(nproc)" -extra-arg=-Wno-unknown-warning-option "${files[@]}" \
    >"$COCOON_BUILD/clang-tidy.log" 2>&1 || {
    grep -E 'error:|warning:' "$COCOON_BUILD/clang-tidy.log" >&2 || tail -20 "$COCOON_BUILD/clang-tidy.log" >&2
    echo "tools/test: clang-tidy found the problems above (.clang-tidy says which checks run and why)" >&2
    return 1
  }
}

# cmake --install into a scratch DESTDIR, both ways a packager installs: with the prefix given
# at configure time, then with another given at install time (`cmake --install --prefix /usr`).
# Each time, uses what was installed: the bwrap link resolves to the installed cocoon, runs a
# sandbox and speaks as bwrap, the man page renders and names every option the binary has, the
# completion (and its bwrap link) completes an option and an --agent profile, --agent finds every built-in profile, the AppArmor profile names the installed
# binary, and install_manifest.txt lists every file installed. Never installs outside a DESTDIR.
cocoon_check_install() {
  local configured other
  configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$COCOON_BUILD/CMakeCache.txt")
  [ -n "$configured" ] || { echo "installed layout: no CMAKE_INSTALL_PREFIX in $COCOON_BUILD/CMakeCache.txt" >&2; return 1; }
  other=/usr
  [ "$configured" != /usr ] || other=/opt/cocoon
  cocoon_check_layout "$configured" && cocoon_check_layout "$configured" --prefix "$other"
}

# cocoon_check_layout PREFIX [--prefix PREFIX]: one install into a fresh DESTDIR, checked.
cocoon_check_layout() {
  local prefix=$1 how="configure-time prefix $1" dest
  shift
  [ $# -eq 0 ] || { prefix=$2; how="install-time prefix $2"; }
  dest=$(mktemp -d /tmp/cocoon-install.XXXXXX) && [ -d "$dest" ] || return 1
  local fail="installed layout ($how, DESTDIR=$dest)"
  DESTDIR=$dest cmake --install "$COCOON_BUILD" "$@" >"$dest.log" 2>&1 ||
    { echo "$fail: cmake --install failed: $(awk '/CMake Error/ {p = 1} /^Call Stack/ {exit} p' "$dest.log" | tr -s '\n ' ' ')" >&2; return 1; }
  local bin=$dest$prefix/bin share=$dest$prefix/share
  [ -x "$bin/cocoon" ] && [ ! -L "$bin/cocoon" ] || { echo "$fail: no executable $bin/cocoon" >&2; return 1; }
  [ -L "$bin/bwrap" ] && [ "$bin/bwrap" -ef "$bin/cocoon" ] ||
    { echo "$fail: $bin/bwrap is not a link to the installed cocoon (-> $(readlink "$bin/bwrap"))" >&2; return 1; }
  local said
  said=$("$bin/bwrap" --ro-bind / / sh -c 'echo ok' 2>&1) || true
  [ "$said" = ok ] || { echo "$fail: the installed bwrap starts no sandbox: $said" >&2; return 1; }
  said=$("$bin/bwrap" --frobnicate 2>&1) || true
  [ "$said" = "bwrap: Unknown option --frobnicate" ] || { echo "$fail: the installed bwrap does not speak as bwrap: $said" >&2; return 1; }
  # --agent finds the profiles installed beside the binary (PREFIX/share/cocoon/profiles).
  # (A worktree of its own: one that holds the DESTDIR, /tmp, is refused, since a profile in it
  # could be the agent's.)
  local profile
  mkdir "$dest.wt"
  for profile in claude codex gemini generic opencode; do
    said=$(cd "$dest.wt" && HOME=/nonexistent XDG_CONFIG_HOME= "$bin/cocoon" --host-user nobody --agent "$profile" --dry-run 2>&1) ||
      { echo "$fail: the installed cocoon does not expand --agent $profile: $said" >&2; rmdir "$dest.wt"; return 1; }
  done
  rmdir "$dest.wt"
  local page=$share/man/man1/cocoon.1 text missing=()
  [ -f "$page" ] || { echo "$fail: no man page $page" >&2; return 1; }
  if groff -man -Tutf8 -ww -z "$page" 2>&1 | grep -q .; then
    echo "$fail: cocoon.1: groff warns:" >&2; groff -man -Tutf8 -ww -z "$page" >&2; return 1
  fi
  text=$(groff -man -Tascii -P-c -P-b -P-u "$page" 2>/dev/null)
  while read -r opt; do
    grep -qe "$opt" <<<"$text" || missing+=("$opt")
  done < <("$bin/cocoon" --help | awk '/^    --/ {print $1}')
  for section in "EXIT STATUS" "DEFAULT SECCOMP POLICY"; do
    grep -qx "$section" <<<"$text" || missing+=("the section $section")
  done
  [ ${#missing[@]} -eq 0 ] || { echo "$fail: cocoon.1 lacks: ${missing[*]}" >&2; return 1; }
  local completions=$share/bash-completion/completions completed
  [ -f "$completions/cocoon" ] && [ -L "$completions/bwrap" ] && [ "$completions/bwrap" -ef "$completions/cocoon" ] ||
    { echo "$fail: no completion $completions/cocoon with a bwrap link to it" >&2; return 1; }
  completed=$(PATH=$bin:$PATH bash -c "source '$completions/bwrap';
    COMP_WORDS=(bwrap --unshare-p); COMP_CWORD=1; _cocoon; echo \${COMPREPLY[*]}")
  [ "$completed" = "--unshare-pid" ] || { echo "$fail: bash completion gave '$completed'" >&2; return 1; }
  completed=$(PATH=$bin:$PATH XDG_CONFIG_HOME=/nonexistent bash -c "source '$completions/cocoon';
    COMP_WORDS=(cocoon --agent cl); COMP_CWORD=2; _cocoon; echo \${COMPREPLY[*]}")
  [ "$completed" = "claude" ] || { echo "$fail: bash completion gave '$completed' for --agent cl" >&2; return 1; }
  local profile=$dest/etc/apparmor.d/cocoon
  said=", no AppArmor profile (no /etc/apparmor.d here)"
  if [ -d /etc/apparmor.d ]; then
    grep -qx "profile cocoon $prefix/bin/cocoon flags=(unconfined) {" "$profile" 2>/dev/null ||
      { echo "$fail: $profile does not attach to $prefix/bin/cocoon: $(grep -s '^profile' "$profile")" >&2; return 1; }
    said=", the AppArmor profile for $prefix/bin/cocoon"
  fi
  local unlisted
  unlisted=$(comm -3 <(sed "s|^|$dest|" "$COCOON_BUILD/install_manifest.txt" | sort) <(find "$dest" ! -type d | sort))
  [ -z "$unlisted" ] || { echo "$fail: install_manifest.txt and the files installed differ:" $unlisted >&2; return 1; }
  rm -rf "$dest" "$dest.log"
  echo "installed layout ($how): cocoon, the bwrap link, cocoon.1 (every option), bash completion$said: ok"
}

# The build a Debian packager runs: Release, with dpkg-buildflags' hardening flags (-g among
# them), into DIR; extra cmake arguments after it (tools/test adds -DCOCOON_WERROR=ON).
cocoon_build_release() {
  local dir=$1
  shift
  CXXFLAGS="$(dpkg-buildflags --get CXXFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
    LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" \
    COCOON_BUILD=$dir cocoon_build -DCMAKE_BUILD_TYPE=Release "$@"
}

# Builds the libFuzzer targets with clang (tests/fuzz) into ${COCOON_BUILD}-fuzz.
cocoon_fuzz_build() {
  local dir=${COCOON_BUILD}-fuzz
  CC=clang CXX=clang++ cmake -S "$COCOON_ROOT" -B "$dir" -G Ninja -DCOCOON_FUZZ=ON >/dev/null
  cmake --build "$dir" --target cocoon_fuzz_cli_plan cocoon_fuzz_channel cocoon_fuzz_egress_request \
    cocoon_fuzz_dns_query -- --quiet
}

# Builds the libFuzzer targets (again: nothing to do where cocoon_fuzz_build ran) and runs each for
# ${COCOON_FUZZ_SECONDS:-30} s on a copy of its seed corpus, two at a time; a crash, a sanitizer
# report or a timeout fails.
cocoon_fuzz() {
  local dir=${COCOON_BUILD}-fuzz failed=0 t pair pid
  cocoon_fuzz_build
  # Two at a time, one a CPU (CI's machine has two): four targets take 60 s of CI's budget (at 30 s
  # each: a whole run took 29.4 minutes here with 45).
  for pair in "cli_plan channel" "egress_request dns_query"; do
    local pids=()
    for t in $pair; do
      cocoon_fuzz_one "$dir" "$t" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  done
  return "$failed"
}

# cocoon_fuzz_one DIR TARGET: one fuzzer from its seed corpus for COCOON_FUZZ_SECONDS (30).
cocoon_fuzz_one() {
  local dir=$1 t=$2 work
  work=$(mktemp -d /tmp/cocoon-fuzz.XXXXXX)
  cp "$COCOON_ROOT/tests/fuzz/corpus/$t/"* "$work/"
  if ! (cd "$work" && "$dir/tests/cocoon_fuzz_$t" -max_total_time="${COCOON_FUZZ_SECONDS:-30}" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 "$work" >"$work.log" 2>&1); then
    tail -40 "$work.log" >&2
    echo "tools/test: fuzzer $t failed (the input that failed is in $work)" >&2
    return 1
  fi
  echo "fuzz $t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work.log" | grep -o '[0-9]*$') runs, no failure"
  rm -rf "$work" "$work.log"
}
