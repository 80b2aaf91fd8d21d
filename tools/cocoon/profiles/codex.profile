# codex: OpenAI's Codex CLI. Headless: codex exec "PROMPT".
# Its update check (api.github.com, github.com) is not allowed: run it with
# -c check_for_update_on_startup=false.
include generic
# Its login (an API key or a ChatGPT login), saved back to the caller's copy; ~/.codex holds its
# sessions too.
--size 268435456
--login-file-try $HOME/.codex/auth.json $HOME/.codex/auth.json
# The hosts it was seen to contact: the API with a key, ChatGPT's with a ChatGPT login.
--egress-allow api.openai.com
--egress-allow chatgpt.com
--egress-allow ab.chatgpt.com
# Where a ChatGPT login is renewed: Codex 0.171's binary names auth.openai.com/oauth/token (not
# seen here, where no login was possible).
--egress-allow auth.openai.com
