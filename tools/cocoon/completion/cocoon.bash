# bash completion for cocoon (and bwrap when it is cocoon): options come from
# the binary's own --help, so they are always the ones it has; after --agent, the
# profiles cocoon would find (the user's, then those installed beside the binary);
# after the options, the command and its arguments complete as commands and files.
_cocoon_profiles()
{
    local exe dir
    exe=$(realpath -- "$(command -v -- "$1")" 2>/dev/null) || return
    for dir in "${XDG_CONFIG_HOME:-$HOME/.config}/cocoon/profiles" "${exe%/*}/../share/cocoon/profiles"; do
        compgen -G "$dir/*.profile" | sed 's|.*/||; s|\.profile$||'
    done
}

_cocoon()
{
    local cur=${COMP_WORDS[COMP_CWORD]}
    local i
    if [[ $COMP_CWORD -gt 1 && ${COMP_WORDS[COMP_CWORD - 1]} == --agent ]]; then
        COMPREPLY=($(compgen -W "$(_cocoon_profiles "${COMP_WORDS[0]}")" -- "$cur"))
        [[ $cur == */* ]] && COMPREPLY=($(compgen -f -- "$cur"))
        return
    fi
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} == -- ]]; then
            COMPREPLY=($(compgen -c -- "$cur"))
            return
        fi
    done
    if [[ $cur == -* ]]; then
        local opts
        opts=$("${COMP_WORDS[0]}" --help 2>/dev/null | awk '/^    --/ {print $1}')
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _cocoon cocoon bwrap
