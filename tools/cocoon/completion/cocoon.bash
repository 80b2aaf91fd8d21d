# bash completion for cocoon (and bwrap when it is cocoon): options come from
# the binary's own --help, so they are always the ones it has; after the
# options, the command and its arguments complete as commands and files.
_cocoon()
{
    local cur=${COMP_WORDS[COMP_CWORD]}
    local i
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
