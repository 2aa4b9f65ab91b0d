"""Irrelevant-tool mixing: modes, eligibility, de-duplication, determinism, caches."""

from __future__ import annotations

import json

import numpy as np
import pytest
from testkit import in_ci

from env_registry import embedding, mixing
from env_registry.mixing import (
    LexicalSimilarity,
    MixingCache,
    MixingError,
    ToolPool,
    build_mixer,
    load_pool,
    shuffle_tools,
)
from env_registry.spec import EnvSpec, Provenance, ScenarioType, SubQuestion
from env_registry.store import EnvStore

TOPICS = {
    "geography": ["city population", "country capital", "river length", "mountain height"],
    "finance": ["currency exchange rate", "stock price", "loan interest", "tax bracket"],
    "weather": ["city forecast", "rainfall total", "wind speed", "humidity level"],
    "sports": ["team ranking", "player score", "match result", "league table"],
}


def env(domain: str, i: int, topics: list[str], code_variant: str = "") -> EnvSpec:
    tools = []
    for t in topics:
        name = "get_" + t.replace(" ", "_")
        tools.append(
            dict(
                name=name,
                description=f"Look up the {t} for a query",
                parameters={"type": "object", "properties": {"query": {"type": "string", "description": t}}},
                source=f"def {name}(query):\n    return {{'value': {len(t)}}}  # {code_variant}\n",
            )
        )
    return EnvSpec.create(
        domain=domain,
        question=f"{domain} question {i}",
        final_answer="1",
        scenario_type=ScenarioType.SINGLE_HOP,
        sub_questions=[SubQuestion(id="q", question="?", answer="1", tool=tools[0]["name"])],
        tools=tools,
        provenance=Provenance(generator="test"),
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory, kit):
    specs = []
    for domain, topics in TOPICS.items():
        for i in range(len(topics)):
            specs.append(env(domain, i, [topics[i], topics[(i + 1) % len(topics)]]))
    # the same tool name in two domains, with different code: one pool entry, both domains
    specs.append(env("sports", 99, ["city population"], code_variant="other"))
    path = kit.write_store(tmp_path_factory.mktemp("mixing") / "store", specs)
    return path, specs


def test_pool_dedups_by_name_and_merges_domains(store):
    path, specs = store
    pool = load_pool(path)
    names = [t.name for t in pool.tools]
    assert len(names) == len(set(names)) == sum(len(v) for v in TOPICS.values())
    pop = next(t for t in pool.tools if t.name == "get_city_population")
    owners = sorted(s.id for s in specs if any(t.name == pop.name for t in s.tools))
    assert pop.env_id == owners[0]  # representative: smallest env id
    assert pop.domains == ("geography", "sports")
    assert pool.conflicting_names == 1


def test_pool_cache_on_disk_next_to_store(store):
    path, _ = store
    pool = load_pool(path)
    cache = list((mixing.Path(path).parent / "store.mixing-cache").glob("pool-*.json"))
    assert len(cache) == 1
    again = load_pool(path)  # no memory cache: read from disk
    assert again.tools == pool.tools
    assert ToolPool.from_json(cache[0].read_text()).tools == pool.tools


@pytest.mark.parametrize("mode", ["none", "random", "banded"])
def test_own_tools_always_present_and_distractors_eligible(store, mode):
    path, specs = store
    mixer = build_mixer(path, mode, seed=3, k=2)
    for spec in specs:
        refs = mixer(spec, 7)
        names = [r.name for r in refs]
        assert len(names) == len(set(names)), "shown names must be unique"
        own = {(r.env_id, r.name) for r in refs if not r.distractor}
        assert own == {(spec.id, t.name) for t in spec.tools}
        pool = {t.name: t for t in mixer.pool.tools}
        for r in refs:
            if r.distractor:
                assert spec.domain not in pool[r.name].domains
                assert r.env_id != spec.id and r.name not in {t.name for t in spec.tools}
        if mode == "none":
            assert all(not r.distractor for r in refs)


def test_random_mode_draws_five_to_nine(store):
    path, specs = store
    mixer = build_mixer(path, "random", seed=0)
    counts = {sum(r.distractor for r in mixer(spec, s)) for spec in specs for s in range(5)}
    assert counts <= set(range(5, 10)) and len(counts) > 1


def test_deterministic_for_sample_and_seed(store):
    path, specs = store
    a = build_mixer(path, "banded", seed=1, k=1, embedding_model="lexical")
    b = build_mixer(path, "banded", seed=1, k=1, embedding_model="lexical")
    assert [a(s, 5) for s in specs] == [b(s, 5) for s in specs]
    assert any(a(s, 5) != a(s, 6) for s in specs)
    assert a.info == {"mode": "banded", "seed": 1, "k": 1, "bands": [0.4, 0.85], "model": mixing.LEXICAL_MODEL}


def test_banded_takes_at_most_k_per_band_per_tool(store):
    path, specs = store
    spec = specs[0]
    for k in (1, 2):
        refs = build_mixer(path, "banded", seed=0, k=k)(spec, 0)
        assert 1 <= sum(r.distractor for r in refs) <= 3 * k * len(spec.tools)


def test_banded_high_band_holds_the_most_similar_candidate(store):
    """With k large, the high band (normalised similarity > 0.85) always yields the top candidate."""
    path, specs = store
    spec = next(s for s in specs if s.domain == "weather" and s.tools[0].name == "get_city_forecast")
    mixer = build_mixer(path, "banded", seed=0, k=100, embedding_model="lexical")
    eligible = mixer._eligible(spec)
    sims = mixer.similarity.scores(mixing.tool_doc(spec.tools[0]))[eligible]
    best = mixer.pool.tools[eligible[int(np.argmax(sims))]].name
    assert best == "get_city_population"  # "city" is the shared word
    assert best in {r.name for r in mixer(spec, 0)}


def test_banded_defaults_to_minilm_where_the_embed_extra_is_installed(store):
    if missing := embedding.missing_packages():
        why = f"the embed extra is not installed (missing {', '.join(missing)})"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    path, specs = store
    mixer = build_mixer(path, "banded", seed=0, k=100)
    assert mixer.info["model"] == embedding.MODEL_KEY
    spec = next(s for s in specs if s.domain == "weather" and s.tools[0].name == "get_city_forecast")
    eligible = mixer._eligible(spec)
    sims = mixer.similarity.scores(mixing.tool_doc(spec.tools[0]))[eligible]
    assert mixer.pool.tools[eligible[int(np.argmax(sims))]].name == "get_city_population"
    assert list((mixing.Path(path).parent / "store.mixing-cache").glob(f"emb-*-{embedding.MODEL_KEY}.npy"))


def test_without_the_embed_extra_banded_says_it_uses_tfidf(store, monkeypatch, caplog):
    monkeypatch.setattr(embedding, "missing_packages", lambda: ["onnxruntime"])
    with caplog.at_level("WARNING", logger="env_registry.mixing"):
        mixer = build_mixer(store[0], "banded", seed=0)
    assert mixer.info["model"] == mixing.LEXICAL_MODEL
    assert "TF-IDF" in caplog.text and "`embed` extra" in caplog.text and "missing onnxruntime" in caplog.text
    with pytest.raises(MixingError, match=r"embedding_model='minilm'.*astra-verl\[embed\]"):
        build_mixer(store[0], "banded", seed=0, embedding_model="minilm")


def test_lexical_similarity_prefers_related_docs():
    docs = [
        "get city population\nPopulation of a city",
        "convert currency\nExchange money",
        "city area\nArea of a city",
    ]
    sim = LexicalSimilarity(docs)
    s = sim.scores("city population lookup\nHow many people live in a city")
    assert s[0] > s[2] > s[1] >= 0
    assert sim.scores(docs[0])[0] == pytest.approx(1.0)


def test_shuffle_is_deterministic_and_complete(store):
    _, specs = store
    refs = build_mixer(store[0], "random", seed=0)(specs[0], 0)
    again = shuffle_tools(list(reversed(refs)), specs[0].id, (0, 0))
    assert again == refs
    assert sorted(shuffle_tools(refs, specs[0].id, 1), key=str) == sorted(refs, key=str)


def test_errors_are_clear(store, tmp_path):
    path, _ = store
    with pytest.raises(MixingError, match="not one of"):
        build_mixer(path, "fancy", seed=0)
    with pytest.raises(MixingError, match="no such local model directory|sentence-transformers is not installed"):
        build_mixer(path, "banded", seed=0, embedding_model=str(tmp_path / "no-model"))
    with pytest.raises(MixingError, match="unknown mixing option"):
        build_mixer(path, "random", seed=0, bogus=1)
    with pytest.raises(FileNotFoundError):
        build_mixer(tmp_path / "nothing-here", "none", seed=0)


def test_pool_json_roundtrip_rejects_other_versions(store):
    pool = load_pool(store[0])
    bad = json.loads(pool.to_json())
    bad["version"] = 99
    with pytest.raises(MixingError, match="version"):
        ToolPool.from_json(json.dumps(bad))


def test_a_cache_reuses_only_what_the_same_settings_built_and_stays_bounded(store, tmp_path):
    path, _ = store
    cache = MixingCache(max_entries=2)
    a = build_mixer(path, "banded", seed=0, cache=cache)
    assert build_mixer(path, "banded", seed=5, k=3, cache=cache).similarity is a.similarity  # same pool and model
    other = build_mixer(path, "banded", seed=0, cache=cache, cache_dir=tmp_path / "other")
    assert other.pool is not a.pool and other.similarity is not a.similarity  # other settings: built anew
    assert build_mixer(path, "banded", seed=0).similarity is not a.similarity  # no cache passed: nothing shared
    build_mixer(path, "banded", seed=0, cache=cache, cache_dir=tmp_path / "third")
    assert len(cache.pools) == len(cache.models) == 2
    assert build_mixer(path, "banded", seed=0, cache=cache).similarity is not a.similarity  # the oldest went


def test_a_store_opened_by_location_is_closed_when_the_mixer_is_built(store, monkeypatch):
    path, _ = store
    opened, closed = [], []
    real_open, real_close = EnvStore.open.__func__, EnvStore.close

    def open_(cls, *args, **kwargs):
        opened.append(real_open(cls, *args, **kwargs))
        return opened[-1]

    def close(self):
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(EnvStore, "open", classmethod(open_))
    monkeypatch.setattr(EnvStore, "close", close)
    monkeypatch.setattr(EnvStore, "__del__", lambda self: None)  # only an explicit close counts
    mixer = build_mixer(path, "banded", seed=0)
    assert opened and [id(s) for s in closed] == [id(s) for s in opened] and mixer.pool.tools
    with EnvStore.open(path) as mine:  # a store the caller passes stays open: it is the caller's
        build_mixer(mine, "random", seed=0)
        assert mine not in closed
