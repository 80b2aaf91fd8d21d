# opencode: OpenCode. Headless: opencode run "PROMPT".
# At each first start in a fresh home it fetches about 31 MB of packages from npm into
# ~/.cache/opencode.
include generic
# Its provider logins, saved back to the caller's copy; the folder holds its sessions too.
--size 268435456
--login-file-try $HOME/.local/share/opencode/auth.json $HOME/.local/share/opencode/auth.json
# The hosts it was seen to contact: its model list, its packages, its plugins' home.
--egress-allow models.opencode.ai
--egress-allow registry.npmjs.org
--egress-allow github.com
# Its model providers' APIs: Anthropic's and OpenAI's here; add yours with --egress-allow HOST.
--egress-allow api.anthropic.com
--egress-allow api.openai.com
