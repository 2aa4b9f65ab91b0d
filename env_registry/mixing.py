"""Irrelevant-tool mixing (docs/method.md §3.3): which other environments' tools an episode also sees.

Mixing is decided at export (`env_registry.export`), once per row; the rollout only shows what
the row lists.

Distractors are real tools of other environments: the model sees their schemas next to its
own, calling one runs that tool's code in the sandbox (and costs precision). Selection happens
at export time, so a row fixes its tool list and every rollout of it sees the same tools:

    mixer = build_mixer(store, "banded", seed=0, k=1)
    refs = mixer(env, seed)      # list[ToolRef]: own tools + distractors, in final prompt order

The returned list is already shuffled (deterministically, by `shuffle_tools`): it is the order
the prompt shows, so an exporter must keep it as is (`RowInfo.tools`). Everything is a pure
function of (pool, mode, options, build seed, call seed, env id).

Modes
- `none`: the environment's own tools only.
- `random`: `random_min..random_max` (default 5..9) tools drawn uniformly from other domains.
- `banded` (the paper's): for each in-scope tool, every eligible candidate's similarity to it is
  min-max normalised over the eligible candidates; candidates fall into bands high (> 0.85),
  medium (0.4..0.85) and low (< 0.4); up to `k` per band are drawn uniformly; the union over
  the instance's tools is the distractor set.
Eligible: not of the instance's domain (a tool shared by several domains is out if any of them
is the instance's), and not named like one of the instance's own tools (shown names must be
unique; the prompt cannot show two `get_weather`s).

The pool is every tool of the store, de-duplicated by name as the paper does. Names that
collide across environments with different code keep one representative: the tool of the
environment with the smallest id (stable for a given store); its domains are the union of the
domains of all environments using that name, so the domain filter stays conservative. The pool
reports how many names had conflicting code.

Similarity
- `minilm` (default where the `embed` extra is installed): all-MiniLM-L6-v2 sentence
  embeddings on onnxruntime (`env_registry.embedding`), cosine.
- `lexical` (the default without the extra, said in a warning; nothing to download): TF-IDF
  over tool documentation (name tokens counted twice, description, parameter names,
  descriptions and enum values), cosine.
- an embedding model, when `embedding_model` names a local sentence-transformers model path:
  loaded lazily. A model that is asked for (`minilm` or a path) but cannot be loaded fails
  building the mixer (no silent fall back to lexical).
Pool and embeddings are cached on disk next to the store (`<store>.mixing-cache/`, or
`cache_dir`), keyed by the store's content and the model; in memory only in a `MixingCache` the
caller owns and passes in (bounded, keyed by every setting that shapes what it holds).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import re
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from astra_foundation.errors import UserError
from env_registry import embedding
from env_registry.rows import ToolRef
from env_registry.spec import EnvSpec, ToolSpec
from env_registry.store import EnvStore

logger = logging.getLogger(__name__)

MODES = ("none", "random", "banded")
POOL_VERSION = 1
LEXICAL_MODEL = "lexical-tfidf-v1"
# `embedding_model` values naming the built-in similarities (anything else is a local path)
LEXICAL_CHOICE = "lexical"
MINILM_CHOICE = "minilm"
BAND_HIGH = 0.85
BAND_LOW = 0.4


class MixingError(UserError, ValueError):
    """Mixing is misconfigured or the store cannot provide a pool."""


# -- tool documentation and the pool ---------------------------------------------------------
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be by for from has in is it its of on or that the this to was were will with "
    "which what when who how all any can may should must if into than then there these those not".split()
)


def tool_doc(tool: ToolSpec) -> str:
    """The text a tool is compared by: name, description, parameter names/descriptions/enums."""
    parts = [tool.name.replace("_", " "), tool.description]
    props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    for pname, pschema in (props or {}).items():
        parts.append(str(pname).replace("_", " "))
        if isinstance(pschema, dict):
            parts.append(str(pschema.get("description", "")))
            parts.extend(str(v) for v in pschema.get("enum", []) or [])
    return "\n".join(p for p in parts if p)


def _tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(_CAMEL.sub(" ", text).lower()) if len(w) > 1 and w not in _STOPWORDS]


@dataclass(frozen=True)
class PoolTool:
    name: str
    env_id: str  # the representative's environment
    domains: tuple[str, ...]  # every domain using this name
    doc: str


@dataclass
class ToolPool:
    tools: list[PoolTool]
    conflicting_names: int = 0  # names used by several environments with different code
    store_key: str = ""

    @classmethod
    def from_specs(cls, specs: Iterable[EnvSpec], store_key: str = "") -> ToolPool:
        by_name: dict[str, list[tuple[str, str, ToolSpec]]] = defaultdict(list)
        for spec in specs:
            for tool in spec.tools:
                by_name[tool.name].append((spec.id, spec.domain, tool))
        tools, conflicting = [], 0
        for name in sorted(by_name):
            uses = sorted(by_name[name], key=lambda u: u[0])
            if len({u[2].source for u in uses}) > 1:
                conflicting += 1
            env_id, _, rep = uses[0]
            tools.append(PoolTool(name, env_id, tuple(sorted({u[1] for u in uses})), tool_doc(rep)))
        return cls(tools=tools, conflicting_names=conflicting, store_key=store_key)

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": POOL_VERSION,
                "store_key": self.store_key,
                "conflicting_names": self.conflicting_names,
                "tools": [asdict(t) for t in self.tools],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ToolPool:
        d = json.loads(text)
        if d.get("version") != POOL_VERSION:
            raise MixingError(f"tool pool cache version {d.get('version')!r} is not {POOL_VERSION}")
        tools = [PoolTool(t["name"], t["env_id"], tuple(t["domains"]), t["doc"]) for t in d["tools"]]
        return cls(tools=tools, conflicting_names=d["conflicting_names"], store_key=d["store_key"])


# -- similarity models -----------------------------------------------------------------------
class LexicalSimilarity:
    """TF-IDF (sublinear tf, smoothed idf, l2-normalised) with an inverted index; cosine scores."""

    model_key = LEXICAL_MODEL

    def __init__(self, docs: list[str]):
        tokenized = [self._doc_terms(d) for d in docs]
        n = len(docs)
        df = Counter(term for terms in tokenized for term in set(terms))
        self.idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
        postings: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
        for i, terms in enumerate(tokenized):
            for term, w in self._weights(terms).items():
                postings[term][0].append(i)
                postings[term][1].append(w)
        self.postings = {
            t: (np.asarray(ix, dtype=np.int64), np.asarray(ws, dtype=np.float64)) for t, (ix, ws) in postings.items()
        }
        self.n = n

    @staticmethod
    def _doc_terms(doc: str) -> list[str]:
        name, _, rest = doc.partition("\n")
        name_terms = _tokens(name)
        return name_terms + name_terms + _tokens(rest)  # the name counts twice

    def _weights(self, terms: list[str]) -> dict[str, float]:
        tf = Counter(t for t in terms if t in self.idf)
        w = {t: (1.0 + math.log(c)) * self.idf[t] for t, c in tf.items()}
        norm = math.sqrt(sum(v * v for v in w.values())) or 1.0
        return {t: v / norm for t, v in w.items()}

    def scores(self, doc: str) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float64)
        for term, w in self._weights(self._doc_terms(doc)).items():
            ix, ws = self.postings[term]
            out[ix] += w * ws
        return out


class EmbeddingSimilarity:
    """Cosine similarity of sentence-transformers embeddings (normalised) of the tool docs."""

    def __init__(self, model_path: str, docs: list[str], cache_file: Path | None, batch_size: int = 64):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MixingError(
                f"mixing embedding_model={model_path!r} is configured but sentence-transformers is not installed "
                "(pip install sentence-transformers), or unset embedding_model to use the lexical model"
            ) from exc
        if not Path(model_path).exists():
            raise MixingError(f"mixing embedding_model={model_path!r}: no such local model directory")
        self.model = SentenceTransformer(model_path, local_files_only=True)
        self.batch_size = batch_size
        self.model_key = "st:" + _model_fingerprint(Path(model_path))
        if cache_file is not None and cache_file.exists():
            self.matrix = np.load(cache_file)
        else:
            self.matrix = self._encode(docs, progress=True)
            if cache_file is not None:
                cache_file.parent.mkdir(parents=True, exist_ok=True)
                np.save(cache_file, self.matrix)
        if self.matrix.shape[0] != len(docs):
            raise MixingError(f"embedding cache {cache_file} has {self.matrix.shape[0]} rows for {len(docs)} tools")
        self._query_cache: dict[str, np.ndarray] = {}

    def _encode(self, docs: list[str], progress: bool = False) -> np.ndarray:
        return np.asarray(
            self.model.encode(docs, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=progress),
            dtype=np.float32,
        )

    def scores(self, doc: str) -> np.ndarray:
        q = self._query_cache.get(doc)
        if q is None:
            q = self._query_cache[doc] = self._encode([doc])[0]
        return self.matrix @ q


def _model_fingerprint(path: Path) -> str:
    h = hashlib.sha256(str(path.resolve()).encode())
    for f in sorted(path.glob("*.json")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


# -- selection -------------------------------------------------------------------------------
def _rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def shuffle_tools(refs: list[ToolRef], env_id: str, seed: Any) -> list[ToolRef]:
    """The prompt order of a row's tools: a deterministic shuffle keyed by (env id, seed)."""
    out = sorted(refs, key=lambda r: (r.distractor, r.name, r.env_id))
    _rng("shuffle", env_id, seed).shuffle(out)
    return out


def min_max(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return np.zeros_like(x) if hi - lo <= 1e-12 else (x - lo) / (hi - lo)


@dataclass
class ToolMixer:
    """`mixer(env, seed) -> list[ToolRef]` (see the module docstring); `info` goes into RowInfo.mixing."""

    pool: ToolPool
    mode: str
    seed: int = 0
    k: int = 1
    random_min: int = 5
    random_max: int = 9
    band_high: float = BAND_HIGH
    band_low: float = BAND_LOW
    similarity: Any = None  # LexicalSimilarity | EmbeddingSimilarity for banded
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _domain_masks: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise MixingError(f"mixing mode {self.mode!r} is not one of {MODES}")
        if self.k < 0 or not 0 <= self.random_min <= self.random_max:
            raise MixingError(f"bad mixing options: k={self.k}, random {self.random_min}..{self.random_max}")
        if not 0 <= self.band_low <= self.band_high <= 1:
            raise MixingError(f"bands need 0 <= band_low <= band_high <= 1, got {self.band_low}, {self.band_high}")
        self._index = {t.name: i for i, t in enumerate(self.pool.tools)}

    @property
    def info(self) -> dict[str, Any]:
        d: dict[str, Any] = {"mode": self.mode, "seed": self.seed}
        if self.mode == "banded":
            d.update(k=self.k, bands=[self.band_low, self.band_high], model=self.similarity.model_key)
        elif self.mode == "random":
            d.update(range=[self.random_min, self.random_max])
        return d

    def __call__(self, env: EnvSpec, seed: Any = None) -> list[ToolRef]:
        own = [ToolRef(env_id=env.id, name=t.name) for t in env.tools]
        if len({r.name for r in own}) != len(own):
            raise MixingError(f"environment {env.id} has duplicate tool names; fix the environment")
        rng = _rng(self.mode, self.seed, seed, env.id)
        picked: list[int] = []
        if self.mode != "none":
            eligible = self._eligible(env)
            picked = self._random(eligible, rng) if self.mode == "random" else self._banded(env, eligible, rng)
        distractors = [
            ToolRef(env_id=self.pool.tools[i].env_id, name=self.pool.tools[i].name, distractor=True) for i in picked
        ]
        return shuffle_tools(own + distractors, env.id, (self.seed, seed))

    def _eligible(self, env: EnvSpec) -> np.ndarray:
        mask = self._domain_masks.get(env.domain)
        if mask is None:
            mask = np.asarray([env.domain not in t.domains for t in self.pool.tools], dtype=bool)
            self._domain_masks[env.domain] = mask
        mask = mask.copy()
        for t in env.tools:
            i = self._index.get(t.name)
            if i is not None:
                mask[i] = False
        return np.flatnonzero(mask)

    def _random(self, eligible: np.ndarray, rng: random.Random) -> list[int]:
        n = min(rng.randint(self.random_min, self.random_max), len(eligible))
        return sorted(rng.sample(eligible.tolist(), n))

    def _banded(self, env: EnvSpec, eligible: np.ndarray, rng: random.Random) -> list[int]:
        if len(eligible) == 0:
            return []
        chosen: set[int] = set()
        # an environment without tools of its own (an unanswerable variant) bands around its question,
        # so its distractors include near misses of what the question asks
        for doc in [tool_doc(t) for t in env.tools] or [env.question]:
            sims = min_max(self.similarity.scores(doc)[eligible])
            bands = (
                eligible[sims > self.band_high],
                eligible[(sims >= self.band_low) & (sims <= self.band_high)],
                eligible[sims < self.band_low],
            )
            for band in bands:
                members = band.tolist()
                chosen.update(rng.sample(members, min(self.k, len(members))))
        return sorted(chosen)


# -- building from a store -------------------------------------------------------------------
@dataclass
class MixingCache:
    """Tool pools and similarity models kept in memory between mixers, owned by the caller (an
    export run, a test) and passed in. A pool is keyed by the store's content and its disk cache,
    a model by those, its name and its batch size, so a call with other settings builds its own.
    At most `max_entries` of each are kept; the least recently used goes first."""

    max_entries: int = 4
    pools: OrderedDict[tuple, ToolPool] = field(default_factory=OrderedDict)
    models: OrderedDict[tuple, Any] = field(default_factory=OrderedDict)

    def get(self, table: OrderedDict[tuple, Any], key: tuple, build: Callable[[], Any]) -> Any:
        if key in table:
            table.move_to_end(key)
            return table[key]
        value = table[key] = build()
        while len(table) > self.max_entries:
            table.popitem(last=False)
        return value


@contextmanager
def _opened(store: Any) -> Iterator[EnvStore]:
    """The store itself when the caller passed one (it stays the caller's to close), else the store
    at that location, opened for this call and closed when it ends."""
    if isinstance(store, EnvStore):
        yield store
    else:
        with EnvStore.open(store) as opened:
            yield opened


def _store_key(ids: Iterable[str]) -> str:
    h = hashlib.sha256()
    for env_id in sorted(ids):
        h.update(env_id.encode())
        h.update(b"\n")
    return h.hexdigest()[:24]


def _default_cache_dir(store_root: Path) -> Path:
    return store_root.with_name(store_root.name + ".mixing-cache")


def load_pool(store: Any, cache_dir: Path | None = None, cache: MixingCache | None = None) -> ToolPool:
    """The de-duplicated tool pool of a store (`cache`, then the disk cache, then a scan)."""
    with _opened(store) as opened:
        cache_dir = cache_dir or _default_cache_dir(Path(opened.path))
        key = _store_key(opened.ids())
        if cache is None:
            return _scan_pool(opened, key, cache_dir)
        return cache.get(cache.pools, (key, str(cache_dir)), lambda: _scan_pool(opened, key, cache_dir))


def _scan_pool(store: EnvStore, key: str, cache_dir: Path) -> ToolPool:
    cache_file = cache_dir / f"pool-{key}.json"
    if cache_file.exists():
        pool = ToolPool.from_json(cache_file.read_text(encoding="utf-8"))
    else:
        pool = ToolPool.from_specs(iter(store), store_key=key)
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(".tmp")
        tmp.write_text(pool.to_json(), encoding="utf-8")
        tmp.replace(cache_file)
    if pool.conflicting_names:
        logger.warning(
            "tool pool of %s: %d names are used by several environments with different code; one representative "
            "per name is kept (the environment with the smallest id)",
            store.path,
            pool.conflicting_names,
        )
    return pool


def build_mixer(store: Any, mode: str, seed: int = 0, cache: MixingCache | None = None, **opts: Any) -> ToolMixer:
    """The export's mixer: `build_mixer(store, mode, seed, **opts)(env, seed) -> list[ToolRef]`.

    `store` is an `EnvStore` or its location (opened and closed here). Options: `k` (per band,
    default 1), `random_min`/`random_max` (5, 9), `band_low`/`band_high` (0.4, 0.85),
    `embedding_model` (`minilm`, `lexical`, or a local sentence-transformers path; default:
    `minilm` where the `embed` extra is installed, else `lexical`), `embedding_batch_size`,
    `cache_dir`. `cache` keeps pools and models for later calls.
    """
    if mode not in MODES:
        raise MixingError(f"mixing mode {mode!r} is not one of {MODES}")
    cache = cache or MixingCache()
    with _opened(store) as opened:
        cache_dir_opt = opts.pop("cache_dir", None)
        cache_dir = Path(cache_dir_opt) if cache_dir_opt else _default_cache_dir(Path(opened.path))
        pool = load_pool(opened, cache_dir, cache)
    embedding_model = opts.pop("embedding_model", None)
    batch_size = int(opts.pop("embedding_batch_size", 64))
    similarity = None
    if mode == "banded":
        similarity = _similarity(pool, embedding_model, cache_dir, batch_size, cache)
    try:
        return ToolMixer(pool=pool, mode=mode, seed=seed, similarity=similarity, **opts)
    except TypeError as exc:
        raise MixingError(f"unknown mixing option ({exc})") from exc


def default_embedding_model() -> str:
    """`minilm` where the `embed` extra is installed; else `lexical`, with a warning naming the extra."""
    missing = embedding.missing_packages()
    if not missing:
        return MINILM_CHOICE
    logger.warning(
        "banded mixing uses TF-IDF (lexical) similarity: the `embed` extra for MiniLM embeddings is not "
        "installed (missing %s); %s",
        ", ".join(missing),
        embedding.INSTALL,
    )
    return LEXICAL_CHOICE


def _lexical(docs: list[str], pool: ToolPool, cache_dir: Path, batch_size: int) -> Any:
    return LexicalSimilarity(docs)


def _minilm(docs: list[str], pool: ToolPool, cache_dir: Path, batch_size: int) -> Any:
    try:
        return embedding.MiniLMSimilarity(
            docs, cache_dir / f"emb-{pool.store_key}-{embedding.MODEL_KEY}.npy", batch_size
        )
    except embedding.EmbeddingUnavailable as exc:
        raise MixingError(f"mixing embedding_model='minilm': {exc}") from exc


# The named similarity backends; any other `embedding_model` is a local sentence-transformers path.
SIMILARITIES = {LEXICAL_CHOICE: _lexical, MINILM_CHOICE: _minilm}


def _similarity(
    pool: ToolPool, embedding_model: str | None, cache_dir: Path, batch_size: int, cache: MixingCache
) -> Any:
    choice = embedding_model or default_embedding_model()
    model_name = {LEXICAL_CHOICE: LEXICAL_MODEL, MINILM_CHOICE: embedding.MODEL_KEY}.get(choice, choice)
    key = (pool.store_key, model_name, str(cache_dir), batch_size)

    def build() -> Any:
        docs = [t.doc for t in pool.tools]
        if choice in SIMILARITIES:
            return SIMILARITIES[choice](docs, pool, cache_dir, batch_size)
        fp = _model_fingerprint(Path(choice)) if Path(choice).exists() else "missing"
        return EmbeddingSimilarity(choice, docs, cache_dir / f"emb-{pool.store_key}-{fp}.npy", batch_size)

    return cache.get(cache.models, key, build)
