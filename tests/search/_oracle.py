"""The search oracle: a seeded multilingual corpus, generated queries per class, and a
brute-force Python implementation of the semantics written in ``docs/search.md``.

Nothing here touches a database. The corpus is a list of OpenAI-style message dicts
(content, tool name, tool-call JSON); :func:`indexed_text` rebuilds the text both
backends index from the stored columns; :class:`Query` carries a query string and the
expectation of the written semantics, which :func:`expected_hits` evaluates on every
message, one by one.

Two semantics (``docs/search.md``):

* **word**: the text is cut into words as SQLite's unicode61 tokenizer does
  (:func:`words`); a term is a word, a phrase is consecutive words, ``x*`` is any word
  starting with ``x``; ``AND`` / ``OR`` / ``NOT`` as in FTS5.
* **substring**: every term occurs in the indexed text as a literal substring, ASCII
  letters compared case-insensitively and everything else exactly.
"""

from __future__ import annotations

import json
import random
import unicodedata
from dataclasses import dataclass
from typing import Any

SEED = 20261130

# --- vocabulary --------------------------------------------------------------------

LATIN = [
    "deploy",
    "deployment",
    "redeploy",
    "deployer",
    "docker",
    "dockerfile",
    "compose",
    "kubernetes",
    "server",
    "service",
    "servers",
    "python",
    "pythonic",
    "script",
    "scripts",
    "test",
    "tests",
    "testing",
    "error",
    "errors",
    "bug",
    "bugfix",
    "fix",
    "config",
    "configure",
    "configuration",
    "install",
    "installer",
    "build",
    "builder",
    "cache",
    "cached",
    "memory",
    "network",
    "request",
    "response",
    "timeout",
    "retry",
    "token",
    "tokens",
    "session",
    "sessions",
    "message",
    "agent",
    "agents",
    "model",
    "models",
    "search",
    "searching",
    "index",
    "indexes",
    "query",
    "queries",
    "database",
    "migrate",
    "migration",
    "branch",
    "merge",
    "commit",
    "release",
    "version",
    "update",
    "upgrade",
    "log",
    "logs",
    "debug",
    "trace",
    "hello",
    "world",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "api",
    "key",
    "keys",
    "secret",
    "import",
    "export",
    "file",
    "files",
    "path",
]
ACCENTED = [
    "café",
    "cafe",
    "naïve",
    "naive",
    "Ångström",
    "angstrom",
    "résumé",
    "resume",
    "façade",
    "facade",
    "über",
    "uber",
    "niño",
    "nino",
]
CYRILLIC = [
    "ещё",
    "еще",
    "йогурт",
    "иогурт",
    "Ёлка",
    "елка",
    "привет",
    "Привет",
    "сервер",
    "сервера",
    "запуск",
    "ошибка",
]
ARABIC = ["الكتاب", "كتاب", "مرحبا", "خادم", "نشر", "خطأ", "البيانات", "بيانات"]
CJK_CHARS = (
    "部署服务器失败脚本的用写一个这怎么达成完成率修复设置配置文件"
    "记忆断裂通信协议你好世界数据库错误日志测试版本更新"
)
KOREAN = ["검색", "한국어", "배포", "서버", "설정", "오류", "데이터", "스크립트", "완료", "실패"]
KANA = ["キー", "設定", "デプロイ", "サーバー", "すくりぷと", "ファイル", "エラー", "テスト", "ログ", "ｶﾀｶﾅ"]
THAI = ["ภาษาไทย", "การค้นหา", "เซิร์ฟเวอร์", "ข้อผิดพลาด", "ทดสอบ"]
EMOJI = ["🚀", "✅", "🔥", "👍", "🎉", "❤", "⭐", "📦", "🐍", "©", "™", "⚠"]
IDENTIFIERS = [
    "my.app_config.ts",
    "app_config",
    "my-app.config.ts",
    "sp_new",
    "__init__",
    "chat-send",
    "docker-compose-up",
    "simulate.p2.test.ts",
    "C:\\Users\\bob\\notes.txt",
    "C:\\path",
    "/usr/local/bin/python3",
    "src/hermes/state.py",
    "user_id=5",
    "foo:bar",
]
NUMBERS = ["100%", "50%", "$5", "$50", "v1.2", "v1.2.3", "3.14", "1,000", "#42", "2026-11-30", "100", "5"]
CODE = [
    "def deploy(server): return server.start()",
    "for (let i = 0; i < n; i++) { total += i; }",
    'SELECT * FROM messages WHERE content LIKE "%部署%";',
    'if err != nil { return fmt.Errorf("docker: %w", err) }',
    "x = {'key': 'value', 'n': 100}",
]


def _cjk_word(rng: random.Random, low: int = 1, high: int = 5) -> str:
    return "".join(rng.choice(CJK_CHARS) for _ in range(rng.randint(low, high)))


def _fragment(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.30:
        word = rng.choice(LATIN)
        return word.capitalize() if rng.random() < 0.2 else (word.upper() if rng.random() < 0.05 else word)
    if kind < 0.50:
        return _cjk_word(rng)
    if kind < 0.56:
        return rng.choice(ACCENTED)
    if kind < 0.62:
        return rng.choice(CYRILLIC)
    if kind < 0.66:
        return rng.choice(ARABIC)
    if kind < 0.71:
        return rng.choice(KOREAN)
    if kind < 0.76:
        return rng.choice(KANA)
    if kind < 0.80:
        return rng.choice(THAI)
    if kind < 0.85:
        return rng.choice(EMOJI)
    if kind < 0.91:
        return rng.choice(IDENTIFIERS)
    if kind < 0.97:
        return rng.choice(NUMBERS)
    return rng.choice(CODE)


def _sentence(rng: random.Random) -> str:
    parts = [_fragment(rng) for _ in range(rng.randint(2, 12))]
    out = parts[0]
    for part in parts[1:]:
        # Glue a third of the neighbours together: "docker部署", "达成100%完成率".
        out += ("" if rng.random() < 0.33 else " ") + part
    return out


# The mixed-script examples of docs/search.md, plus near misses that must not match them.
ISSUE_MESSAGES = [
    "怎么用docker部署这个服务",
    "docker 部署 失败了",
    "用 Python 写一个脚本",
    "Python脚本的部署",
    "达成100%完成率",
    "launch it 🚀 tonight",
    "docker 部 署 split apart",
    "Pyth on 脚 本",
    "达成100完成率",
    "rocket launch tonight",
]


def build_corpus(size: int = 3000) -> list[list[dict[str, Any]]]:
    """Sessions of messages (``size`` in all, plus the mixed-script examples), the same every run."""
    rng = random.Random(SEED)
    sessions: list[list[dict[str, Any]]] = [[{"role": "user", "content": text} for text in ISSUE_MESSAGES]]
    produced = 0
    while produced < size:
        session: list[dict[str, Any]] = []
        for _ in range(rng.randint(3, 20)):
            roll = rng.random()
            if roll < 0.12:
                call = {
                    "id": f"call_{rng.randint(0, 10**6)}",
                    "type": "function",
                    "function": {
                        "name": rng.choice(["terminal", "read_file", "web_search"]),
                        "arguments": json.dumps({"command": _sentence(rng)}, ensure_ascii=rng.random() < 0.5),
                    },
                }
                session.append(
                    {
                        "role": "assistant",
                        "content": _sentence(rng) if rng.random() < 0.5 else None,
                        "tool_calls": [call],
                    }
                )
            elif roll < 0.22:
                session.append(
                    {
                        "role": "tool",
                        "content": _sentence(rng),
                        "tool_name": rng.choice(["terminal", "读取文件", "read_file"]),
                    }
                )
            else:
                session.append({"role": rng.choice(["user", "assistant"]), "content": _sentence(rng)})
        sessions.append(session)
        produced += len(session)
    return sessions


def indexed_text(content: str | None, tool_name: str | None, tool_calls: str | None) -> str:
    """The text both backends index for one stored message (as upstream's triggers build it)."""
    return f"{content or ''} {tool_name or ''} {tool_calls or ''}"


# --- the word tokenizer (SQLite unicode61 with its default options) -----------------


def _is_token_char(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] in "LN" or category == "Co" or 0x300 <= ord(char) <= 0x36F


def _fold(char: str) -> str:
    if 0x300 <= ord(char) <= 0x36F:
        return ""  # a combining Latin diacritic is removed from inside the word
    decomposed = unicodedata.normalize("NFD", char)
    if (
        len(decomposed) == 2
        and 0x300 <= ord(decomposed[1]) <= 0x36F
        and "LATIN" in unicodedata.name(char, "")
    ):
        return decomposed[0].lower()
    lowered = char.lower()
    return lowered if len(lowered) == 1 else char


def words(text: str) -> list[str]:
    """``text`` cut into folded words, as unicode61 (remove_diacritics=1) does."""
    out: list[str] = []
    current = ""
    for char in text:
        if _is_token_char(char):
            current += _fold(char)
        elif current:
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return [word for word in out if word]


# --- queries and their expectations ----------------------------------------------


@dataclass(frozen=True)
class Query:
    """A query string, its class, and what the written semantics says it matches.

    ``semantics`` is ``"word"`` or ``"substring"``. ``alternatives`` is an OR of
    ``(required, excluded)``: for word semantics each item is a phrase (a tuple of
    words, the last one a prefix when ``prefix`` is set); for substring semantics each
    item is one literal term.
    """

    cls: str
    text: str
    semantics: str
    alternatives: tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]
    prefix: bool = False


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def _has_phrase(tokens: list[str], phrase: tuple[str, ...], prefix: bool) -> bool:
    size = len(phrase)
    for start in range(len(tokens) - size + 1):
        window = tokens[start : start + size]
        if window[:-1] != list(phrase[:-1]):
            continue
        last = window[-1]
        if last == phrase[-1] or (prefix and last.startswith(phrase[-1])):
            return True
    return False


def matches(query: Query, text: str, tokens: list[str]) -> bool:
    """Whether one message (its indexed ``text``, ASCII-lower-cased, and ``words(text)``)
    is a hit for ``query``."""
    if query.semantics == "substring":
        folded = text  # expected_hits hands over the ASCII-lower-cased text
        return any(
            all(_ascii_lower(term) in folded for term in required)
            and not any(_ascii_lower(term) in folded for term in excluded)
            for required, excluded in query.alternatives
        )
    return any(
        all(_has_phrase(tokens, phrase, query.prefix) for phrase in required)
        and not any(_has_phrase(tokens, phrase, query.prefix) for phrase in excluded)
        for required, excluded in query.alternatives
    )


def expected_hits(query: Query, texts: dict[Any, str], tokens: dict[Any, list[str]]) -> set[Any]:
    """The keys of every message the written semantics says ``query`` finds."""
    if query.semantics == "substring":
        folded = _folded(texts)
        found: set[Any] = set()
        for required, excluded in query.alternatives:
            needed = [_ascii_lower(term) for term in required]
            banned = [_ascii_lower(term) for term in excluded]
            first = needed[0]
            found |= {
                key
                for key, text in folded.items()
                if first in text
                and all(term in text for term in needed)
                and not any(term in text for term in banned)
            }
        return found
    # Word semantics: every message holding one word of some alternative is a candidate;
    # the candidates are then checked one by one, brute force.
    postings = _postings(tokens)
    candidates: set[Any] = set()
    for required, _ in query.alternatives:
        for phrase in required:
            for word in phrase:
                if query.prefix and word == phrase[-1]:
                    for known, keys in postings.items():
                        if known.startswith(word):
                            candidates |= keys
                else:
                    candidates |= postings.get(word, set())
    return {key for key in candidates if matches(query, texts[key], tokens[key])}


_POSTINGS: dict[int, dict[str, set[Any]]] = {}


def _postings(tokens: dict[Any, list[str]]) -> dict[str, set[Any]]:
    if id(tokens) not in _POSTINGS:
        index: dict[str, set[Any]] = {}
        for key, ws in tokens.items():
            for word in ws:
                index.setdefault(word, set()).add(key)
        _POSTINGS[id(tokens)] = index
    return _POSTINGS[id(tokens)]


_FOLDED: dict[int, dict[Any, str]] = {}


def _folded(texts: dict[Any, str]) -> dict[Any, str]:
    if id(texts) not in _FOLDED:
        _FOLDED[id(texts)] = {key: _ascii_lower(text) for key, text in texts.items()}
    return _FOLDED[id(texts)]


def _word(rng: random.Random, pool: list[list[str]]) -> str:
    message = rng.choice(pool)
    return rng.choice(message)


def _substring_of(rng: random.Random, texts: list[str], predicate: Any, low: int, high: int) -> str:
    """A substring of ``low``..``high`` characters, all satisfying ``predicate``, from some message."""
    for _ in range(1000):
        text = rng.choice(texts)
        runs: list[str] = []
        current = ""
        for char in text:
            if predicate(char):
                current += char
            elif current:
                runs.append(current)
                current = ""
        if current:
            runs.append(current)
        runs = [run for run in runs if len(run) >= low]
        if runs:
            run = rng.choice(runs)
            size = rng.randint(low, min(high, len(run)))
            start = rng.randint(0, len(run) - size)
            return run[start : start + size]
    raise AssertionError("corpus has no such substring")


def _is_han(char: str) -> bool:
    return char in CJK_CHARS


def _sub(cls: str, text: str, *terms: str) -> Query:
    return Query(cls, text, "substring", ((tuple(terms), ()),))


def _word_query(cls: str, text: str, *phrases: tuple[str, ...], prefix: bool = False) -> Query:
    return Query(cls, text, "word", ((tuple(phrases), ()),), prefix)


def generate_queries(texts: list[str], per_class: int = 200) -> list[Query]:
    """``per_class`` seeded queries for every class of ``docs/search.md``."""
    rng = random.Random(SEED + 1)
    latin_tokens = [[w for w in words(t) if w.isascii() and w.isalpha() and len(w) > 2] for t in texts]
    latin_tokens = [ws for ws in latin_tokens if ws]
    all_tokens = [words(t) for t in texts]
    both = [
        t
        for t, ws in zip(texts, all_tokens, strict=True)
        if _has_han(t) and any(w.isascii() and w.isalpha() for w in ws)
    ]
    by_word: dict[str, list[list[str]]] = {}
    for ws in latin_tokens:
        for w in set(ws):
            by_word.setdefault(w, []).append(ws)
    long_messages = [ws for ws in all_tokens if len(ws) >= 3]
    pairs = [ws for ws in latin_tokens if len(set(ws)) > 1]
    queries: list[Query] = []
    for _ in range(per_class):
        # Latin words: one or two words, any case; a near-miss word now and then.
        first = _word(rng, latin_tokens) if rng.random() < 0.9 else rng.choice(LATIN) + "zz"
        if rng.random() < 0.5:
            queries.append(
                _word_query("latin_words", first.upper() if rng.random() < 0.2 else first, (first,))
            )
        else:
            second = rng.choice(rng.choice(by_word[first]) if first in by_word else [first])
            queries.append(_word_query("latin_words", f"{first} {second}", (first,), (second,)))
        # Phrases: two or three consecutive words of a message.
        tokens = rng.choice(long_messages)
        start = rng.randint(0, len(tokens) - 2)
        phrase = tuple(tokens[start : start + rng.randint(2, 3)])
        if not all(_is_plain_word(w) for w in phrase):
            phrase = (first, _word(rng, latin_tokens))
        queries.append(_word_query("phrases", '"' + " ".join(phrase) + '"', phrase))
        # Prefixes.
        stem = _word(rng, latin_tokens)[: rng.randint(2, 5)]
        queries.append(_word_query("prefixes", stem + "*", (stem,), prefix=True))
        # Boolean operators.
        pair = rng.choice(pairs)
        a, b = rng.sample(sorted(set(pair)), 2)
        op = rng.choice(["AND", "OR", "NOT"])
        if op == "OR":
            queries.append(Query("boolean", f"{a} OR {b}", "word", ((((a,),), ()), (((b,),), ()))))
        elif op == "NOT":
            queries.append(Query("boolean", f"{a} NOT {b}", "word", ((((a,),), ((b,),)),)))
        else:
            queries.append(_word_query("boolean", f"{a} AND {b}", (a,), (b,)))
        # CJK of 1, 2 and 3+ characters (one or two terms).
        for cls, low, high in (("cjk_1", 1, 1), ("cjk_2", 2, 2), ("cjk_3plus", 3, 5)):
            term = _substring_of(rng, texts, _is_han, low, high)
            if rng.random() < 0.3:
                other = _substring_of(rng, texts, _is_han, low, high)
                queries.append(_sub(cls, f"{term} {other}", term, other))
            else:
                queries.append(_sub(cls, term, term))
        # Latin and CJK mixed in one query (in either order) or glued in one token.
        source = rng.choice(both)
        latin = rng.choice([w for w in words(source) if w.isascii() and w.isalpha()])
        han = _substring_of(rng, [source], _is_han, 1, 3)
        shape = rng.random()
        if shape < 0.35:
            queries.append(_sub("mixed", f"{latin} {han}", latin, han))
        elif shape < 0.55:
            # Operators on the substring path: OR between alternatives, NOT as "and not".
            other = _substring_of(rng, texts, _is_han, 1, 3)
            if rng.random() < 0.5:
                queries.append(
                    Query("mixed", f"{han} OR {latin}", "substring", (((han,), ()), ((latin,), ())))
                )
            else:
                queries.append(Query("mixed", f"{han} NOT {other}", "substring", (((han,), (other,)),)))
        elif shape < 0.68:
            queries.append(_sub("mixed", f"{han} {latin.capitalize()}", han, latin.capitalize()))
        elif shape < 0.8:
            # Part of a run of ASCII letters and digits (inside a longer word, or a number),
            # in mixed case, beside a short CJK term: on PostgreSQL its trigrams join the
            # stored-gram containment (revision 0016), so they must be found inside longer
            # runs and whatever the case.
            infix = _substring_of(rng, [source], lambda c: c.isascii() and c.isalnum(), 3, 8)
            infix = "".join(c.upper() if rng.random() < 0.4 else c for c in infix)
            short_han = _substring_of(rng, [source], _is_han, 1, 2)
            queries.append(_sub("mixed", f"{infix} {short_han}", infix, short_han))
        else:
            glued = _substring_of(rng, texts, lambda c: _is_han(c) or ("a" <= c.lower() <= "z"), 4, 9)
            queries.append(
                _sub(
                    "mixed",
                    glued if _has_han(glued) else glued + " " + han,
                    *((glued,) if _has_han(glued) else (glued, han)),
                )
            )
        # Identifiers and paths: the phrase of their words; a colon separates two phrases
        # that must both occur (``C:\path`` is ``c`` and ``path``, anywhere).
        ident = rng.choice(IDENTIFIERS)
        queries.append(_word_query("identifiers", ident, *_colon_phrases(ident)))
        # Numbers with symbols: the phrase of their words.
        number = rng.choice(NUMBERS)
        queries.append(_word_query("numbers", number, tuple(words(number))))
        # Emoji and other symbols, alone or beside a word.
        symbol = rng.choice(EMOJI)
        if rng.random() < 0.5:
            queries.append(_sub("emoji", symbol, symbol))
        else:
            queries.append(_sub("emoji", f"{symbol} {latin}", symbol, latin))
        # Korean, kana, Thai: substrings; Cyrillic, Arabic and Latin accents: words.
        pool = rng.choice([KOREAN, KANA, THAI])
        piece = rng.choice(pool)
        cut = piece[: rng.randint(1, len(piece))] if rng.random() < 0.5 else piece
        queries.append(_sub("korean_kana_thai", cut, cut))
        spaced = rng.choice(CYRILLIC + ARABIC + ACCENTED)
        queries.append(_word_query("cyrillic_arabic_accents", spaced, tuple(words(spaced))))
    return queries


def _colon_phrases(text: str) -> tuple[tuple[str, ...], ...]:
    """The phrases of ``text``'s words between its colons, which the search strips."""
    return tuple(tuple(words(part)) for part in text.split(":") if words(part))


def _has_han(text: str) -> bool:
    return any(_is_han(char) for char in text)


def _is_plain_word(word: str) -> bool:
    return word.isascii() and word.isalnum()


SUBSTRING_CLASSES = ("cjk_1", "cjk_2", "cjk_3plus", "mixed", "emoji", "korean_kana_thai")
WORD_CLASSES = (
    "latin_words",
    "phrases",
    "prefixes",
    "boolean",
    "identifiers",
    "numbers",
    "cyrillic_arabic_accents",
)
