// Environment editing for the command. Pure.
// Runs in: caller, setup: the caller plans the environment; set-up sets PWD.
#include "ns/env.h"

#include <algorithm>

namespace cocoon::ns {
namespace {

bool has_name(const std::string& entry, const std::string& name)
{
    return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 && entry[name.size()] == '=';
}

void unset_env(std::vector<std::string>& env, const std::string& name)
{
    std::erase_if(env, [&](const std::string& e) { return has_name(e, name); });
}

}  // namespace

std::optional<std::string> get_env(const std::vector<std::string>& env, const std::string& name)
{
    for (const std::string& entry : env)
        if (has_name(entry, name))
            return entry.substr(name.size() + 1);
    return std::nullopt;
}

void set_env(std::vector<std::string>& env, const std::string& name, const std::string& value)
{
    unset_env(env, name);
    env.push_back(name + "=" + value);
}

std::vector<std::string> build_env(const std::vector<std::string>& base, const std::vector<EnvOp>& ops)
{
    std::vector<std::string> env = base;
    for (const EnvOp& op : ops) {
        if (auto* set = std::get_if<SetEnv>(&op)) {
            set_env(env, set->name, set->value);
        } else if (auto* unset = std::get_if<UnsetEnv>(&op)) {
            unset_env(env, unset->name);
        } else if (auto* keep = std::get_if<KeepEnv>(&op)) {
            if (std::optional<std::string> value = get_env(base, keep->name))
                set_env(env, keep->name, *value);
            else
                unset_env(env, keep->name);
        } else {
            env.clear();
        }
    }
    return env;
}

}  // namespace cocoon::ns
