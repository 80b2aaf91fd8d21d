// The command's environment: the caller's, edited by --setenv, --unsetenv, --keep-env and
// --clearenv in order. Pure; computed in the monitor.
// Runs in: caller, setup: the caller plans the environment; set-up sets PWD.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace cocoon::ns {

struct SetEnv {
    std::string name, value;
};
struct UnsetEnv {
    std::string name;
};
struct ClearEnv {};
// --keep-env NAME: NAME as the caller has it, wherever the edits before left it (unset if the
// caller has none).
struct KeepEnv {
    std::string name;
};
using EnvOp = std::variant<SetEnv, UnsetEnv, ClearEnv, KeepEnv>;

// `base` is NAME=VALUE entries (environ); later entries of a name win.
std::vector<std::string> build_env(const std::vector<std::string>& base, const std::vector<EnvOp>& ops);

// The value of NAME in env, if set.
std::optional<std::string> get_env(const std::vector<std::string>& env, const std::string& name);

// Sets NAME=VALUE in env, replacing an existing entry of that name.
void set_env(std::vector<std::string>& env, const std::string& name, const std::string& value);

}  // namespace cocoon::ns
