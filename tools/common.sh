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
  run-clang-tidy -p "$COCOON_BUILD" -quiet -j "$(nproc)" "${files[@]}" >"$COCOON_BUILD/clang-tidy.log" 2>&1 || {
    grep -E 'error:|warning:' "$COCOON_BUILD/clang-tidy.log" >&2 || tail -20 "$COCOON_BUILD/clang-tidy.log" >&2
    echo "tools/test: clang-tidy found the problems above (.clang-tidy says which checks run and why)" >&2
    return 1
  }
}

# cmake --install into a scratch DESTDIR, then use what was installed: the
# bwrap link runs a sandbox and speaks as bwrap, the man page renders and
# names every option the binary has, the completion completes an option.
cocoon_check_install() {
  local dest
  dest=$(mktemp -d /tmp/cocoon-install.XXXXXX)
  DESTDIR=$dest cmake --install "$COCOON_BUILD" --prefix /usr/local >/dev/null
  local bin=$dest/usr/local/bin
  [ "$("$bin/bwrap" --ro-bind / / sh -c 'echo ok')" = ok ] || { echo "installed bwrap link: no sandbox" >&2; return 1; }
  [ "$("$bin/bwrap" --frobnicate 2>&1)" = "bwrap: Unknown option --frobnicate" ] ||
    { echo "installed bwrap link: not speaking as bwrap" >&2; return 1; }
  local page=$dest/usr/local/share/man/man1/cocoon.1 text missing=()
  if groff -man -Tutf8 -ww -z "$page" 2>&1 | grep -q .; then
    echo "cocoon.1: groff warns:" >&2; groff -man -Tutf8 -ww -z "$page" >&2; return 1
  fi
  text=$(groff -man -Tascii -P-c -P-b -P-u "$page" 2>/dev/null)
  while read -r opt; do
    grep -qe "$opt" <<<"$text" || missing+=("$opt")
  done < <("$bin/cocoon" --help | awk '/^    --/ {print $1}')
  [ ${#missing[@]} -eq 0 ] || { echo "cocoon.1 lacks: ${missing[*]}" >&2; return 1; }
  local completed
  completed=$(PATH=$bin:$PATH bash -c "source '$dest/usr/local/share/bash-completion/completions/bwrap';
    COMP_WORDS=(bwrap --unshare-p); COMP_CWORD=1; _cocoon; echo \${COMPREPLY[*]}")
  [ "$completed" = "--unshare-pid" ] || { echo "bash completion gave '$completed'" >&2; return 1; }
  rm -rf "$dest"
  echo "installed layout: cocoon, the bwrap link, cocoon.1 (every option), bash completion: ok"
}

# The build a Debian packager runs: Release, with dpkg-buildflags' hardening
# flags and no -Werror, into its own directory.
cocoon_build_release() {
  local dir=$1
  CXXFLAGS="$(dpkg-buildflags --get CXXFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
    LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" \
    COCOON_BUILD=$dir cocoon_build -DCMAKE_BUILD_TYPE=Release -DCOCOON_WERROR=OFF
}

# Builds the libFuzzer targets with clang (tests/fuzz) and runs each for ${COCOON_FUZZ_SECONDS:-60}
# s on a copy of its seed corpus; a crash, a sanitizer report or a timeout fails.
cocoon_fuzz() {
  local dir=${COCOON_BUILD}-fuzz work t
  CC=clang CXX=clang++ cmake -S "$COCOON_ROOT" -B "$dir" -G Ninja -DCOCOON_FUZZ=ON >/dev/null
  cmake --build "$dir" --target cocoon_fuzz_cli_plan cocoon_fuzz_channel cocoon_fuzz_egress_request -- --quiet
  for t in cli_plan channel egress_request; do
    work=$(mktemp -d /tmp/cocoon-fuzz.XXXXXX)
    cp "$COCOON_ROOT/tests/fuzz/corpus/$t/"* "$work/"
    if ! (cd "$work" && "$dir/tests/cocoon_fuzz_$t" -max_total_time="${COCOON_FUZZ_SECONDS:-60}" -timeout=10 \
          -rss_limit_mb=2048 -print_final_stats=1 "$work" >"$work.log" 2>&1); then
      tail -40 "$work.log" >&2
      echo "tools/test: fuzzer $t failed (the input that failed is in $work)" >&2
      return 1
    fi
    echo "fuzz $t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work.log" | grep -o '[0-9]*$') runs, no failure"
    rm -rf "$work" "$work.log"
  done
}
