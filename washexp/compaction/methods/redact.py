"""Strict credential redaction (Hermes' force mode), applied to every text H serializes.

Masked whole with ``[REDACTED]``: private key blocks, prefixed API keys (``sk-``, ``ghp_``,
``AKIA``...), JWTs, ``Authorization``/key headers, secret-looking ``NAME=value`` and
``"name": "value"`` assignments, credentials in URLs (user info and secret query parameters),
bot tokens and phone numbers. Ordinary identifiers (``PAY-4827``, ``10.0.4.17:8443``) pass. The
rules follow the ``redact_sensitive_text(force=True, redact_url_credentials=True)`` generation of
Hermes' ``agent/redact.py``; the wording and code are washexp's own.
"""

from __future__ import annotations

import re

MARK = "[REDACTED]"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?-----END[A-Z ]*PRIVATE KEY"
    r"-----"
)
_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9_-])(?:sk-[A-Za-z0-9_-]{10,}|sk_[A-Za-z0-9_]{10,}|rk_live_[A-Za-z0-9]{10,}"
    r"|gh[pousr]_[A-Za-z0-9]{10,}|github_pat_[A-Za-z0-9_]{10,}|xox[baprs]-[A-Za-z0-9-]{10,}"
    r"|xapp-\d+-[A-Za-z0-9-]{10,}|AKIA[A-Z0-9]{16}|AIza[A-Za-z0-9_-]{30,}|hf_[A-Za-z0-9]{10,}"
    r"|npm_[A-Za-z0-9]{10,}|pypi-[A-Za-z0-9_-]{10,}|gl[a-z]{2,6}-[A-Za-z0-9_.-]{10,}"
    r"|xai-[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{10,}|SG\.[A-Za-z0-9_-]{10,}|tvly-[A-Za-z0-9]{10,}"
    r"|pplx-[A-Za-z0-9]{10,}|r8_[A-Za-z0-9]{10,}|dop_v1_[A-Za-z0-9]{10,})(?![A-Za-z0-9_-])"
)
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_=-]{4,}){0,2}")
_KEYWORDS = "(?:api[ _.-]?key|token|secret|passwd|password|credential|auth)"
# Assignment passes: named groups k (the name) and v (the value that gets masked).
_ASSIGNMENTS = [  # (pattern, skipped when the text holds a URL)
    (
        re.compile(
            r"(?P<k>[A-Z0-9_]{0,50}(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PW"
            r"|CREDENTIAL|AUTH)[A-Z0-9_]{0,50})\s*=\s*(?P<q>['\"]?)(?P<v>\S+)(?P=q)"
        ),
        False,
    ),
    (
        re.compile(
            r"(?<![a-z0-9_])(?P<k>[a-z0-9_]+_(?:key|pass|pw|token|secret|password|passwd"
            r"|credential|auth)(?=[^a-z0-9_]|$))\s*=\s*(?P<q>['\"]?)(?P<v>\S+)(?P=q)",
            re.I,
        ),
        True,
    ),
    (
        re.compile(
            rf"^[ \t]*(?:\d+[|:\t-][ \t]*)?(?:export[ \t]+)?(?P<k>[\w-]*{_KEYWORDS}[\w-]*)="
            r"(?P<q>['\"]?)(?P<v>[^\s&]+?)(?P=q)(?=[\s&]|$)",
            re.I | re.M,
        ),
        True,
    ),
    (
        re.compile(
            r'(?P<k>"(?:api_?key|token|secret|password|access_token|refresh_token|auth_token'
            r'|bearer|secret_value|raw_secret|secret_input|key_material)")\s*:\s*"(?P<v>[^"]+)"',
            re.I,
        ),
        False,
    ),
    (
        re.compile(
            r"^[ \t]*(?:\d+[|:\t-][ \t]*)?(?P<k>[\w.-]*(?:api[ _.-]?key|token|secret|passwd"
            r"|password|credential)[\w.-]*):[ \t]*(?!['\"])(?P<v>[^\s&]+)",
            re.I | re.M,
        ),
        False,
    ),
]
_KEY_WORD = re.compile(
    r"(?:api|auth|access|refresh|session|secret)[ _.-]?(?:key|token)"
    r"|token|secret|passwd|password|pass|pw|credential|auth|key",
    re.I,
)
_STRONG_WORD = re.compile(
    r"(?:api|auth|access|refresh|session|id|bearer)[ _.-]?(?:key|token)"
    r"|key[ _.-]?material|secret|passwd|password|pass|pw|credential|auth"
    r"|bearer",
    re.I,
)
_AUTH_HEADER = re.compile(
    r"((?:Proxy-)?Authorization[\"']?:\s*[\"']?)([A-Za-z][\w.+-]*\s+)?"
    r"([^\s\"']+)",
    re.I,
)
_KEY_HEADER = re.compile(
    r"((?:x-api-key|x-goog-api-key|api-key|apikey|x-api-token|x-auth-token"
    r"|x-access-token)\s*:\s*)(\S+)",
    re.I,
)
_TELEGRAM = re.compile(r"(?<!\d)((?:bot)?\d{8,}:)[-A-Za-z0-9_]{30,}")
_DB_URL = re.compile(r"((?:postgres(?:ql)?|mysql|mongodb(?:\+srv)?|redis|amqp)://[^:\s]+:)[^@\s]+@", re.I)
_USERINFO = re.compile(r"//([^/\s?#@]+)@")
_URL_PARAM = re.compile(r"([?#&;])([A-Za-z0-9_.~+%\-]+)=([^#&;\s\"'<>]*)")
_SECRET_PARAMS = frozenset(
    (
        "access_token",
        "refresh_token",
        "id_token",
        "token",
        "api_key",
        "apikey",
        "client_secret",
        "password",
        "auth",
        "jwt",
        "session",
        "secret",
        "key",
        "code",
        "signature",
        "x-amz-signature",
        "x-goog-signature",
        "sig",
    )
)
_PHONE = re.compile(r"\+[1-9]\d{6,14}(?![A-Za-z0-9])")


def _bounded_word(key: str, rx: re.Pattern[str]) -> bool:
    """``rx`` occurs in ``key`` as a word (edge, non-letter or camelCase boundary; plural s ok)."""

    def ends(j: int, plural: bool = True) -> bool:
        if j >= len(key) or not key[j].isalpha() or (key[j].isupper() and key[j - 1].islower()):
            return True
        return plural and key[j] in "sS" and ends(j + 1, False)

    for m in rx.finditer(key):
        i, prev = m.start(), key[m.start() - 1] if m.start() else ""
        starts = (
            not prev
            or not prev.isalpha()
            or (key[i].isupper() and prev.islower())
            or (key[i].isupper() and prev.isupper() and i + 1 < len(key) and key[i + 1].islower())
        )
        if starts and ends(m.end()):
            return True
    return False


def _opaque(value: str) -> bool:
    """Whether a value looks like a credential rather than a short technical scalar."""
    if len(value) >= 16 and re.fullmatch(r"[A-Fa-f0-9]+", value):
        return True
    if len(value) >= 20 and re.fullmatch(r"[A-Za-z0-9_./+=-]+", value):
        return True
    classes = sum(bool(re.search(p, value)) for p in ("[a-z]", "[A-Z]", "[0-9]"))
    return len(value) >= 12 and classes >= 2


def _mask_assignment(m: re.Match[str]) -> str:
    key, value = m.group("k").strip('"'), m.group("v")
    if value.startswith(MARK) or re.match(r"(?:os\.(?:getenv|environ)|process\.env|\$)", value):
        return m.group(0)  # already masked, or a variable reference rather than a value
    if not (_bounded_word(key, _KEY_WORD) and (_bounded_word(key, _STRONG_WORD) or _opaque(value))):
        return m.group(0)
    s, e = m.start("v") - m.start(), m.end("v") - m.start()
    return m.group(0)[:s] + MARK + m.group(0)[e:]


def redact(text: str) -> str:
    """Strict redaction of credentials in ``text``, each replaced by ``[REDACTED]``."""
    if not text:
        return text or ""
    text = _PRIVATE_KEY.sub(MARK, text)
    text = _PREFIXED.sub(MARK, text)
    for rx, skip_with_url in _ASSIGNMENTS:
        if not (skip_with_url and "://" in text):
            text = rx.sub(_mask_assignment, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + (m.group(2) or "") + MARK, text)
    text = _KEY_HEADER.sub(lambda m: m.group(1) + MARK, text)
    text = _TELEGRAM.sub(lambda m: m.group(1) + MARK, text)
    text = _DB_URL.sub(lambda m: m.group(1) + MARK + "@", text)
    text = _JWT.sub(MARK, text)
    text = _USERINFO.sub(
        lambda m: "//" + (m.group(1).split(":", 1)[0] + ":" + MARK if ":" in m.group(1) else MARK) + "@", text
    )
    text = _URL_PARAM.sub(
        lambda m: (
            f"{m.group(1)}{m.group(2)}={MARK}"
            if m.group(2).lower() in _SECRET_PARAMS or m.group(2).lower().replace("-", "_") in _SECRET_PARAMS
            else m.group(0)
        ),
        text,
    )
    return _PHONE.sub(MARK, text)
