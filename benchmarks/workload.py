"""Seeded, deterministic generator of realistic agent conversations.

The workload imitates what an agent's conversation store sees in practice:

* user and assistant prose of 20-400 words drawn from a Zipf-weighted vocabulary (about 150 common
  English words followed by ~5,000 pronounceable pseudo-words), sprinkled with file paths and
  identifiers;
* roughly 10 % of the prose in Chinese or Japanese, built from a few hundred common characters plus
  recurring 2- and 3-character terms, mostly concentrated in a minority of "CJK sessions";
* roughly 30 % tool traffic: assistant messages carrying OpenAI-style ``tool_calls`` followed by one
  ``role="tool"`` result per call;
* sessions from ``cli``, ``telegram``, ``discord``, ``slack`` and ``tui``, a few of them children of
  an earlier session, some with a unique title.

Everything is a pure function of the seed. Each session uses its own random stream derived from
``(seed, session index)``, so the first *k* sessions are identical whatever ``n_sessions`` is.

The search terms returned by :func:`known_terms` are guaranteed to occur: the first user message of
the first session carries all of them, and they are also injected at a low rate elsewhere so that
searches return more than one hit on larger workloads.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import random
import string
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SOURCES",
    "GeneratedMessage",
    "GeneratedSession",
    "KnownTerms",
    "WorkloadStats",
    "describe",
    "generate_sessions",
    "known_terms",
]

# --------------------------------------------------------------------------------------------
# Static material
# --------------------------------------------------------------------------------------------

#: Session sources with their relative weights.
SOURCES: tuple[tuple[str, float], ...] = (
    ("cli", 0.42),
    ("telegram", 0.20),
    ("discord", 0.13),
    ("slack", 0.10),
    ("tui", 0.15),
)

_MODELS: tuple[str, ...] = (
    "anthropic/claude-sonnet-4",
    "anthropic/claude-opus-4",
    "openai/gpt-4.1",
    "openai/gpt-4.1-mini",
    "nousresearch/hermes-4-405b",
    "nousresearch/hermes-4-70b",
    "google/gemini-2.5-pro",
    "qwen/qwen3-coder",
)

_COMMON_ENGLISH_TEXT = (
    "the of and to a in is it you that he was for on are with as i his they be at one have this "
    "from or had by not word but what some we can out other were all there when up use your how "
    "said an each she which do their time if will way about many then them write would like so "
    "these her long make thing see him two has look more day could go come did number sound no "
    "most people my over know water than call first who may down side been now find any new work "
    "part take get place made live where after back little only round man year came show every "
    "good me give our under name very through just form sentence great think say help low line "
    "differ turn cause much mean before move right boy old too same tell does set three want air "
    "well also play small end put home read hand port large spell add even land here must big high "
    "such follow act why ask men change went light kind off need house picture try us again animal "
    "point mother world near build self earth father file code test error server config deploy"
)

_ONSETS = (
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "br",
    "cr",
    "dr",
    "fl",
    "gr",
    "kl",
    "pr",
    "qu",
    "sh",
    "st",
    "th",
    "tr",
    "ch",
    "sk",
    "sn",
    "sp",
)
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "io", "y")
_CODAS = ("", "", "", "n", "r", "l", "s", "x", "m", "nd", "rk", "st", "ng", "th")

# A few hundred common Chinese characters used as the "alphabet" of generated Chinese prose.
_CJK_CHARS = "".join(
    dict.fromkeys(
        "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学"
        "对可里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面"
        "公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情"
        "部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北"
        "少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神"
        "数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台"
        "象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思"
        "非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运半候七必城父强步完深"
        "区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱倒未持音良则"
    )
)
_ZH_WORDS = (
    "我们",
    "你们",
    "这个",
    "那个",
    "因为",
    "所以",
    "但是",
    "如果",
    "已经",
    "可以",
    "需要",
    "现在",
    "时候",
    "问题",
    "方法",
    "结果",
    "系统",
    "功能",
    "版本",
    "更新",
    "安装",
    "运行",
    "检查",
    "修改",
    "文件",
    "代码",
    "测试",
    "数据",
    "服务",
    "用户",
    "日志",
    "部署",
    "配置",
    "模型",
    "接口",
    "网络",
    "命令",
    "错误",
    "目录",
    "环境",
    "任务",
    "消息",
    "会话",
    "搜索",
    "索引",
    "性能",
    "内存",
    "速度",
)
_ZH_RECURRING_3 = ("数据库", "服务器", "命令行", "工作流", "知识库", "自动化", "编译器", "浏览器", "时间戳")
_ZH_RECURRING_2 = ("记忆", "缓存", "断点", "线程", "容器", "镜像", "脚本", "权限")
_JA_WORDS = (
    "です",
    "ます",
    "ありがとう",
    "お願いします",
    "について",
    "確認",
    "設定",
    "問題",
    "解決",
    "データベース",
    "サーバー",
    "テスト",
    "ファイル",
    "エラー",
    "メモリ",
    "ログ",
    "コード",
    "実行",
    "してください",
    "できます",
    "しました",
    "ですか",
    "これ",
    "それ",
    "どう",
    "少し",
    "まだ",
)
_JA_PARTICLES = ("の", "は", "を", "に", "が", "で", "と", "も", "から", "まで")
_ZH_PUNCT = ("，", "，", "，", "。", "。", "？", "！", "：")

_DIRS = ("src", "lib", "app", "tests", "docs", "scripts", "config", "internal", "pkg", "web")
_EXTS = ("py", "ts", "rs", "go", "md", "json", "yaml", "toml", "sql", "sh")

# Tool name -> kind of argument payload it takes.
_TOOLS: tuple[tuple[str, str], ...] = (
    ("terminal", "command"),
    ("read_file", "path"),
    ("write_file", "write"),
    ("patch", "patch"),
    ("search_files", "grep"),
    ("web_search", "query"),
    ("web_extract", "url"),
    ("execute_code", "code"),
    ("memory", "memory"),
    ("todo", "todo"),
    ("send_message", "message"),
    ("vision_analyze", "image"),
)
_SHELL_CMDS = (
    "ls -la",
    "git status",
    "git diff --stat",
    "pytest -q",
    "npm test",
    "cargo build",
    "make",
    "docker ps",
    "cat",
    "grep -rn",
    "python -m pip list",
    "du -sh",
    "tail -n 50",
    "uv sync",
)

_REASONING_SESSION_P = 0.5  # sessions run on a reasoning model: their assistant turns carry reasoning
_TOOL_TURN_P = 0.38  # share of turns in which the assistant calls tools (=> ~30 % tool messages)
_CJK_SESSION_SHARE = 0.09  # share of sessions whose user writes mostly in Chinese/Japanese
_CJK_IN_CJK_SESSION = 0.9
_CJK_ELSEWHERE = 0.02
_JAPANESE_SHARE = 0.3  # of CJK text, how much is Japanese
_INJECT_LATIN_P = 0.03  # chance a Latin prose message carries one of the known Latin terms
_INJECT_CJK_P = 0.25  # chance a CJK prose message carries one of the known CJK terms
_CHILD_SESSION_P = 0.1
_TITLE_P = 0.4
_GOLDEN = 0.6180339887498949

_EPOCH = dt.datetime(2026, 1, 5, 8, 0, 0, tzinfo=dt.UTC)


# --------------------------------------------------------------------------------------------
# Public data types
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class GeneratedMessage:
    """One message of a generated conversation, in the shape ``append_message`` accepts."""

    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    token_count: int | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    """The model's reasoning text (assistant messages of reasoning models)."""


@dataclass(slots=True)
class GeneratedSession:
    """One generated session and its messages, in append order."""

    id: str
    source: str
    model: str
    parent_id: str | None
    title: str | None
    messages: list[GeneratedMessage] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class KnownTerms:
    """Search queries guaranteed to match at least one message of a seeded workload.

    Every attribute is a query string ready to hand to ``search_messages``.
    """

    word: str
    """A single Latin word of middling frequency."""
    two_words: str
    """Two Latin words separated by a space (implicit AND)."""
    phrase: str
    """A three-word phrase wrapped in double quotes."""
    prefix: str
    """A four-letter stem followed by ``*``."""
    cjk3: str
    """A recurring three-character Chinese term (routes to the trigram index)."""
    cjk2: str
    """A recurring two-character Chinese term (routes to the LIKE scan)."""

    def as_dict(self) -> dict[str, str]:
        """Return the terms keyed by kind, in a stable order."""
        return {
            "word": self.word,
            "two_words": self.two_words,
            "phrase": self.phrase,
            "prefix": self.prefix,
            "cjk3": self.cjk3,
            "cjk2": self.cjk2,
        }


# --------------------------------------------------------------------------------------------
# Corpus: vocabulary, weights and known terms for one seed
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Corpus:
    vocab: tuple[str, ...]
    cum_weights: tuple[float, ...]
    cjk_tokens: tuple[str, ...]
    cjk_cum_weights: tuple[float, ...]
    ja_tokens: tuple[str, ...]
    ja_cum_weights: tuple[float, ...]
    terms: KnownTerms
    word: str
    pair: tuple[str, str]
    phrase_words: tuple[str, str, str]
    prefix_word: str


def _zipf_cum_weights(n: int, exponent: float) -> tuple[float, ...]:
    return tuple(itertools.accumulate(1.0 / (rank**exponent) for rank in range(1, n + 1)))


def _pseudo_word(rng: random.Random) -> str:
    syllables = rng.choices((1, 2, 3, 4), weights=(2, 6, 4, 1))[0]
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)]
    parts[-1] += rng.choice(_CODAS)
    return "".join(parts)


@functools.lru_cache(maxsize=8)
def _corpus(seed: int) -> _Corpus:
    rng = random.Random(f"hermes-bench-vocab:{seed}")
    common = list(dict.fromkeys(_COMMON_ENGLISH_TEXT.split()))
    seen = set(common)
    pseudo: list[str] = []
    while len(pseudo) < 5000:
        word = _pseudo_word(rng)
        if len(word) >= 3 and word not in seen:
            seen.add(word)
            pseudo.append(word)
    vocab = (*common, *pseudo)

    # Known Latin terms: pseudo-words of middling rank so hit counts stay selective.
    mid = pseudo[100:600]
    word = rng.choice(mid)
    pair_a, pair_b = rng.sample([w for w in mid if w != word], 2)
    p1, p2, p3 = rng.sample([w for w in pseudo[800:2500] if w not in (word, pair_a, pair_b)], 3)
    phrase_words = (p1, p2, p3)
    # A stem shared by several vocabulary words, taken from a frequent-ish pseudo-word.
    stems: dict[str, list[str]] = {}
    for w in pseudo[:1500]:
        if len(w) >= 6:
            stems.setdefault(w[:4], []).append(w)
    stem_choices = sorted(stem for stem, words in stems.items() if len(words) >= 3)
    stem = rng.choice(stem_choices)
    prefix_word = stems[stem][0]

    cjk_tokens = (*_ZH_WORDS, *_ZH_RECURRING_2, *_ZH_RECURRING_3, *_CJK_CHARS)
    ja_tokens = (*_JA_PARTICLES, *_JA_WORDS, *_CJK_CHARS[:120])
    terms = KnownTerms(
        word=word,
        two_words=f"{pair_a} {pair_b}",
        phrase='"' + " ".join(phrase_words) + '"',
        prefix=f"{stem}*",
        cjk3=rng.choice(_ZH_RECURRING_3),
        cjk2=rng.choice(_ZH_RECURRING_2),
    )
    return _Corpus(
        vocab=vocab,
        cum_weights=_zipf_cum_weights(len(vocab), 1.0),
        cjk_tokens=cjk_tokens,
        cjk_cum_weights=_zipf_cum_weights(len(cjk_tokens), 0.9),
        ja_tokens=ja_tokens,
        ja_cum_weights=_zipf_cum_weights(len(ja_tokens), 0.9),
        terms=terms,
        word=word,
        pair=(pair_a, pair_b),
        phrase_words=phrase_words,
        prefix_word=prefix_word,
    )


def known_terms(seed: int) -> KnownTerms:
    """Return the search queries guaranteed to occur in ``generate_sessions(..., seed=seed)``.

    The guarantee holds for any workload with at least one session of at least one message.
    """
    return _corpus(seed).terms


# --------------------------------------------------------------------------------------------
# Text builders
# --------------------------------------------------------------------------------------------


class _Writer:
    """Builds message texts from one session's random stream."""

    def __init__(self, corpus: _Corpus, rng: random.Random) -> None:
        self.c = corpus
        self.rng = rng

    # -- Latin -------------------------------------------------------------------------------

    def _path(self) -> str:
        rng = self.rng
        depth = rng.randint(1, 3)
        parts = [rng.choice(_DIRS) for _ in range(depth)]
        stem = rng.choices(self.c.vocab, cum_weights=self.c.cum_weights)[0]
        return "/".join(parts) + f"/{stem}.{rng.choice(_EXTS)}"

    def _identifier(self) -> str:
        a, b = self.rng.choices(self.c.vocab[150:], k=2)
        return self.rng.choice((f"{a}_{b}", f"{a}-{b}", f"{a}{b.capitalize()}", f"{a}.{b}"))

    def latin_words(self, n: int) -> list[str]:
        """Return ``n`` Zipf-sampled tokens with the odd path, identifier or number mixed in."""
        rng = self.rng
        words = rng.choices(self.c.vocab, cum_weights=self.c.cum_weights, k=n)
        for i in range(n):
            roll = rng.random()
            if roll < 0.012:
                words[i] = self._path()
            elif roll < 0.024:
                words[i] = self._identifier()
            elif roll < 0.03:
                words[i] = str(rng.randint(2, 65535))
        return words

    def prose(self, n_words: int, *, force_all_terms: bool = False) -> str:
        """Return Latin prose of ``n_words`` words, split into sentences."""
        rng = self.rng
        words = self.latin_words(n_words)
        c = self.c
        if force_all_terms:
            extra = [c.word, c.pair[0], c.pair[1], *c.phrase_words, c.prefix_word]
            words[: len(extra)] = extra
        elif rng.random() < _INJECT_LATIN_P:
            pick = rng.randrange(4)
            chunk: list[str]
            if pick == 0:
                chunk = [c.word]
            elif pick == 1:
                chunk = [c.pair[0], *rng.choices(c.vocab[:150], k=rng.randint(0, 4)), c.pair[1]]
            elif pick == 2:
                chunk = list(c.phrase_words)
            else:
                chunk = [c.prefix_word]
            at = rng.randrange(max(1, len(words) - len(chunk)))
            words[at : at + len(chunk)] = chunk
        out: list[str] = []
        i = 0
        while i < len(words):
            size = rng.randint(5, 18)
            sentence = words[i : i + size]
            i += size
            sentence[0] = sentence[0][:1].upper() + sentence[0][1:]
            out.append(" ".join(sentence) + rng.choices((".", "?", "!", ":"), weights=(80, 12, 4, 4))[0])
        return " ".join(out)

    # -- CJK ---------------------------------------------------------------------------------

    def cjk_prose(self, n_words: int, *, japanese: bool, force_terms: bool = False) -> str:
        """Return Chinese or Japanese prose of roughly ``n_words`` words (1.6 characters each)."""
        rng = self.rng
        target = max(20, int(n_words * 1.6))
        if japanese:
            tokens, weights = self.c.ja_tokens, self.c.ja_cum_weights
        else:
            tokens, weights = self.c.cjk_tokens, self.c.cjk_cum_weights
        pieces: list[str] = []
        length = 0
        since_punct = 0
        while length < target:
            tok = rng.choices(tokens, cum_weights=weights)[0]
            pieces.append(tok)
            length += len(tok)
            since_punct += len(tok)
            if since_punct > rng.randint(8, 24):
                pieces.append(rng.choice(_ZH_PUNCT))
                since_punct = 0
            elif rng.random() < 0.03:
                # English technical words inside CJK text are common in practice.
                pieces.append(" " + self._identifier() + " ")
        if force_terms:
            pieces[:0] = [self.c.terms.cjk3, "，", self.c.terms.cjk2, "，"]
        elif rng.random() < _INJECT_CJK_P:
            term = rng.choice((self.c.terms.cjk3, self.c.terms.cjk2))
            pieces.insert(rng.randrange(len(pieces) + 1), term)
        text = "".join(pieces).strip()
        return text if text.endswith(("。", "？", "！")) else text + "。"

    # -- Tools -------------------------------------------------------------------------------

    def _call_id(self) -> str:
        alphabet = string.ascii_letters + string.digits
        return "call_" + "".join(self.rng.choices(alphabet, k=24))

    def tool_arguments(self, kind: str, cjk: bool) -> dict[str, Any]:
        """Return a plausible argument object for a tool of the given kind."""
        rng = self.rng
        words = self.latin_words
        if kind == "command":
            command = f"{rng.choice(_SHELL_CMDS)} {self._path()}"
            return {"command": command, "timeout": rng.choice((30, 60, 120))}
        if kind == "path":
            args: dict[str, Any] = {"path": self._path()}
            if rng.random() < 0.4:
                args["offset"] = rng.randint(1, 400)
                args["limit"] = rng.choice((50, 100, 200))
            return args
        if kind == "write":
            body = "\n".join(" ".join(words(8)) for _ in range(rng.randint(2, 8)))
            return {"path": self._path(), "content": body}
        if kind == "patch":
            return {"path": self._path(), "old_string": " ".join(words(6)), "new_string": " ".join(words(7))}
        if kind == "grep":
            glob = f"*.{rng.choice(_EXTS)}"
            return {"pattern": self._identifier(), "path": rng.choice(_DIRS), "file_glob": glob}
        if kind == "query":
            q = self.cjk_prose(4, japanese=False) if cjk else " ".join(words(rng.randint(2, 6)))
            return {"query": q, "limit": 5}
        if kind == "url":
            return {"urls": [f"https://{rng.choice(self.c.vocab[150:600])}.example.com/{self._identifier()}"]}
        if kind == "code":
            name = self._identifier().replace("-", "_").replace(".", "_")
            return {"code": f"def {name}(x):\n    return x * {rng.randint(2, 9)}\n\nprint({name}(21))"}
        if kind == "memory":
            return {"action": rng.choice(("add", "replace", "remove")), "content": " ".join(words(12))}
        if kind == "todo":
            items = [{"id": str(i), "content": " ".join(words(5)), "status": "pending"} for i in range(3)]
            return {"todos": items}
        if kind == "message":
            return {"target": rng.choice(("telegram", "discord", "slack")), "message": " ".join(words(15))}
        return {"image_url": f"/tmp/{self._identifier()}.png", "question": " ".join(words(8))}

    def tool_calls(self, count: int, cjk: bool) -> list[dict[str, Any]]:
        """Return ``count`` tool calls in OpenAI's function-calling format."""
        calls = []
        for _ in range(count):
            name, kind = self.rng.choice(_TOOLS)
            calls.append(
                {
                    "id": self._call_id(),
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(self.tool_arguments(kind, cjk))},
                }
            )
        return calls

    def tool_result(self, name: str) -> str:
        """Return the textual output of a tool run."""
        rng = self.rng
        roll = rng.random()
        if name in ("terminal", "execute_code") or roll < 0.2:
            lines = [" ".join(self.latin_words(rng.randint(3, 12))) for _ in range(rng.randint(1, 25))]
            return json.dumps({"output": "\n".join(lines), "exit_code": rng.choice((0, 0, 0, 1))})
        if name == "read_file":
            n = rng.randint(5, 60)
            start = rng.randint(1, 300)
            lines = [f"{start + i:>5}|{' '.join(self.latin_words(rng.randint(2, 10)))}" for i in range(n)]
            return "\n".join(lines)
        if name in ("web_search", "web_extract"):
            results = [
                {
                    "title": " ".join(self.latin_words(5)),
                    "url": f"https://{self._identifier()}.example.org",
                    "description": " ".join(self.latin_words(rng.randint(15, 40))),
                }
                for _ in range(rng.randint(1, 5))
            ]
            return json.dumps({"success": True, "results": results})
        return json.dumps({"success": True, "message": " ".join(self.latin_words(rng.randint(4, 30)))})


# --------------------------------------------------------------------------------------------
# Sessions
# --------------------------------------------------------------------------------------------


def _tokens(text: str | None) -> int:
    if not text:
        return 0
    cjk = sum(1 for ch in text if ord(ch) > 0x2E80)
    return max(1, int(len(text.split()) * 1.3 + cjk * 0.8))


def _words_for(rng: random.Random, role: str) -> int:
    if role == "user":
        return int(rng.triangular(20, 220, 30))
    return int(rng.triangular(20, 400, 70))


def _session_header(index: int, rng: random.Random) -> tuple[str, str, str]:
    when = _EPOCH + dt.timedelta(seconds=index * 97 + rng.randint(0, 90))
    sid = f"{when:%Y%m%d_%H%M%S}_{rng.getrandbits(24):06x}"
    names, weights = zip(*SOURCES, strict=True)
    source = rng.choices(names, weights=weights)[0]
    model = rng.choice(_MODELS)
    return sid, source, model


def _build_session(
    corpus: _Corpus,
    seed: int,
    index: int,
    n_messages: int,
    earlier_ids: Sequence[str],
    used_titles: set[str],
) -> GeneratedSession:
    rng = random.Random(f"hermes-bench-session:{seed}:{index}")
    sid, source, model = _session_header(index, rng)
    parent = rng.choice(earlier_ids) if earlier_ids and rng.random() < _CHILD_SESSION_P else None

    title: str | None = None
    if rng.random() < _TITLE_P:
        words = rng.choices(corpus.vocab[60:2000], k=rng.randint(2, 5))
        title = " ".join(words).capitalize()
        if title in used_titles:
            title = f"{title} ({index})"
        used_titles.add(title)

    # Low-discrepancy choice of "CJK sessions" keeps their share close to target on small runs.
    cjk_session = ((index + seed) * _GOLDEN) % 1.0 < _CJK_SESSION_SHARE
    japanese = cjk_session and rng.random() < _JAPANESE_SHARE
    cjk_p = _CJK_IN_CJK_SESSION if cjk_session else _CJK_ELSEWHERE

    writer = _Writer(corpus, rng)
    # Reasoning comes from a stream of its own, so adding it left every other generated
    # value (and the known search terms) as it was.
    thinking = _Writer(corpus, random.Random(f"hermes-bench-reasoning:{seed}:{index}"))
    reasons = thinking.rng.random() < _REASONING_SESSION_P

    def reasoning() -> str | None:
        return thinking.prose(thinking.rng.randint(20, 120)) if reasons else None

    messages: list[GeneratedMessage] = []

    def text_message(role: str) -> str:
        force = index == 0 and not messages
        n_words = _words_for(rng, role)
        if force:
            # Guaranteed carrier of every known term: Latin prose with a CJK tail.
            return (
                writer.prose(n_words, force_all_terms=True)
                + " "
                + writer.cjk_prose(12, japanese=False, force_terms=True)
            )
        if rng.random() < cjk_p:
            return writer.cjk_prose(n_words, japanese=japanese or rng.random() < _JAPANESE_SHARE / 3)
        return writer.prose(n_words)

    while len(messages) < n_messages:
        content = text_message("user")
        messages.append(GeneratedMessage("user", content, token_count=_tokens(content)))
        remaining = n_messages - len(messages)
        if remaining <= 0:
            break
        if remaining >= 3 and rng.random() < _TOOL_TURN_P:
            n_calls = min(rng.choices((1, 2, 3), weights=(6, 3, 1))[0], remaining - 1)
            calls = writer.tool_calls(n_calls, cjk=cjk_session)
            preface = writer.prose(rng.randint(5, 25)) if rng.random() < 0.35 else None
            messages.append(
                GeneratedMessage(
                    "assistant",
                    preface,
                    tool_calls=calls,
                    token_count=_tokens(preface) + 20 * n_calls,
                    finish_reason="tool_calls",
                    reasoning=reasoning(),
                )
            )
            for call in calls:
                name = call["function"]["name"]
                result = writer.tool_result(name)
                messages.append(
                    GeneratedMessage(
                        "tool", result, tool_call_id=call["id"], tool_name=name, token_count=_tokens(result)
                    )
                )
            if len(messages) >= n_messages:
                break
        reply = text_message("assistant")
        finish = "length" if rng.random() < 0.02 else "stop"
        messages.append(
            GeneratedMessage(
                "assistant", reply, token_count=_tokens(reply), finish_reason=finish, reasoning=reasoning()
            )
        )

    return GeneratedSession(sid, source, model, parent, title, messages[:n_messages])


def generate_sessions(n_sessions: int, messages_per_session: int, seed: int) -> Iterator[GeneratedSession]:
    """Yield ``n_sessions`` deterministic sessions of exactly ``messages_per_session`` messages.

    Parents always precede their children, so the sessions can be written in the order given.
    Tool-call messages are always followed by their tool results unless the session's message budget
    runs out first.
    """
    if n_sessions < 0 or messages_per_session < 0:
        raise ValueError("n_sessions and messages_per_session must be non-negative")
    corpus = _corpus(seed)
    ids: list[str] = []
    titles: set[str] = set()
    for index in range(n_sessions):
        session = _build_session(corpus, seed, index, messages_per_session, ids, titles)
        ids.append(session.id)
        yield session


# --------------------------------------------------------------------------------------------
# Summary statistics (for sanity checks and reports)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkloadStats:
    """Shape of a generated workload."""

    sessions: int
    messages: int
    child_sessions: int
    titled_sessions: int
    tool_messages: int
    """Assistant messages with ``tool_calls`` plus ``role="tool"`` results."""
    tool_calls: int
    cjk_text_messages: int
    text_messages: int
    """User and assistant messages without ``tool_calls``."""
    sources: dict[str, int]
    content_chars: int

    @property
    def tool_share(self) -> float:
        """Fraction of all messages that are tool traffic."""
        return self.tool_messages / self.messages if self.messages else 0.0

    @property
    def cjk_share(self) -> float:
        """Fraction of prose messages written mainly in Chinese or Japanese."""
        return self.cjk_text_messages / self.text_messages if self.text_messages else 0.0


def _mostly_cjk(text: str) -> bool:
    cjk = sum(1 for ch in text if ord(ch) > 0x2E80)
    return cjk * 2 > len(text.replace(" ", ""))


def describe(sessions: Iterable[GeneratedSession]) -> WorkloadStats:
    """Count what a workload contains (tool share, CJK share, sources...)."""
    n_sessions = n_messages = children = titled = tool_msgs = calls = cjk = text = chars = 0
    sources: dict[str, int] = {}
    for s in sessions:
        n_sessions += 1
        children += s.parent_id is not None
        titled += s.title is not None
        sources[s.source] = sources.get(s.source, 0) + 1
        for m in s.messages:
            n_messages += 1
            chars += len(m.content or "")
            if m.role == "tool" or m.tool_calls:
                tool_msgs += 1
                calls += len(m.tool_calls or ())
            elif m.role in ("user", "assistant") and m.content:
                text += 1
                cjk += _mostly_cjk(m.content)
    return WorkloadStats(
        sessions=n_sessions,
        messages=n_messages,
        child_sessions=children,
        titled_sessions=titled,
        tool_messages=tool_msgs,
        tool_calls=calls,
        cjk_text_messages=cjk,
        text_messages=text,
        sources=dict(sorted(sources.items())),
        content_chars=chars,
    )
