# gemini: Google's Gemini CLI. Headless: gemini -p "PROMPT".
include generic
# In a fresh home it trusts no folder and refuses to run headless without this.
--setenv GEMINI_CLI_TRUST_WORKSPACE true
# Its Google login, saved back to the caller's copy; ~/.gemini holds its settings and history.
--size 268435456
--login-file-try $HOME/.gemini/oauth_creds.json $HOME/.gemini/oauth_creds.json
# The hosts it was seen to contact with an API key.
--egress-allow generativelanguage.googleapis.com
--egress-allow play.googleapis.com
# Where a Google login is renewed and served: Gemini CLI 0.61's code names oauth2.googleapis.com
# (its token endpoint) and cloudcode-pa.googleapis.com (Code Assist); not seen here, with no login.
--egress-allow oauth2.googleapis.com
--egress-allow cloudcode-pa.googleapis.com
