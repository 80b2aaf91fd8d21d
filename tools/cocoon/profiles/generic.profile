# generic: any agent, with no login file and no host (add them after --agent).
# The hardened agent layout, which every built-in profile includes.
#
# A profile is cocoon's command line, one option per line as typed (quotes and backslashes as in
# sh), lines starting with # ignored, and `include NAME` for another profile. $HOME is the caller's
# home and $WORKTREE the worktree (--worktree DIR, else the current directory), both canonical;
# nothing else expands, so a profile means the same wherever it runs. man cocoon has each option.

# New namespaces for everything: the network has only lo, and the egress below is the only way out.
--unshare-all
# A stop reaches the agent, and nothing it started outlives the sandbox.
--die-with-parent
--forward-signals
--kill-after 10
# It cannot push input into the caller's terminal.
--new-session
# No fd the orchestrator left inheritable reaches it: only 0-2 and those options name.
--close-fds
# No capability, whoever the caller (a root caller's command would keep root's).
--cap-drop ALL
# A link planted in the worktree in an earlier run never redirects a bind.
--no-follow-sources
# None of the caller's variables (tokens, SSH_AUTH_SOCK) nor its host's name.
--hostname sandbox
--clearenv
--setenv PATH /usr/local/bin:/usr/bin:/bin
--keep-env TERM
--setenv LANG C.UTF-8
# The system, read-only.
--ro-bind /usr /usr
--ro-bind /etc /etc
--symlink usr/bin /bin
--symlink usr/lib /lib
--symlink usr/lib64 /lib64
--proc /proc
--dev /dev
# /tmp and the home new and empty at every run (the agent starts with no memory), each bounded:
# what the agent keeps there is kept in memory.
--size 1073741824
--tmpfs /tmp
--size 1073741824
--fresh-home $HOME
# The worktree read-write, its .git read-only: hooks and config there run on the host later.
--bind $WORKTREE $WORKTREE
--ro-bind-try $WORKTREE/.git $WORKTREE/.git
--chdir $WORKTREE
# Egress: cocoon's proxy on 127.0.0.1:3128 inside, with the proxy variables, reaching only the
# hosts --egress-allow names. With --relay PORT SOCKET the caller's own proxy replaces it.
--egress 3128
--proxy-env 3128
