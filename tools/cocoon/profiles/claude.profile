# claude: Claude Code. Headless: claude -p "PROMPT".
include generic
# Its login, renewed by the CLI and saved back to the caller's copy (made at the first login).
# ~/.claude holds its sessions too: more room than a login file's folder gets by default.
--size 268435456
--login-file-try $HOME/.claude/.credentials.json $HOME/.claude/.credentials.json
# The hosts it was seen to contact: the API, then the OAuth login and its renewal.
--egress-allow api.anthropic.com
--egress-allow platform.claude.com
