"""EnvStore: append, reopen, O(1) lookups, duplicates, crash recovery, concurrent readers."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import random

import pytest

from env_registry import store as store_mod
from env_registry.store import EnvStore, StoreCorrupt, StoreError, StoreLocked


def _fill(path, envs, **kw):
    with EnvStore.open(path, "a", **kw) as s:
        assert s.add_many(envs) == len(envs)
    return path


def test_append_reopen_roundtrip(tmp_path, envs):
    path = tmp_path / "s"
    with EnvStore.open(path, "a") as s:
        assert s.add_many(envs[:30]) == 30
        assert s.add(envs[30]) is True
        assert s.add(envs[0]) is False  # duplicate content
        assert s.add_many(envs[:40]) == 9
        assert len(s) == 40
    with EnvStore.open(path, "a") as s:  # reopening for append keeps everything
        assert s.add_many(envs) == 20
    r = EnvStore.open(path)
    assert len(r) == 60 and r.ids() == [e.id for e in envs]
    assert r.get(envs[17].id) == envs[17]
    assert envs[3].id in r and "f" * 32 not in r
    assert [e.id for e in r] == r.ids()
    assert [e.id for e in r.filter(lambda e: e.domain == "climate")] == [e.id for e in envs if e.domain == "climate"]
    with pytest.raises(KeyError, match="not in the store"):
        r.get("0" * 32)


def test_get_reads_one_record_from_one_shard(tmp_path, envs, monkeypatch):
    path = _fill(tmp_path / "s", envs, shard_max_bytes=40_000)
    shards = sorted((path / "shards").iterdir())
    assert len(shards) > 4
    r = EnvStore.open(path)
    target = envs[-7]
    entry = r._index[target.id]
    # Every other shard can vanish: a lookup never touches them.
    for shard in shards:
        if shard.name != f"{entry.shard:05d}.jsonl":
            shard.unlink()
    reads = []
    real_pread = os.pread
    monkeypatch.setattr(store_mod.os, "pread", lambda fd, n, off: reads.append((n, off)) or real_pread(fd, n, off))
    assert r.get(target.id) == target
    assert reads == [(entry.length, entry.offset)]
    assert r.get(target.id) is r.get(target.id)  # LRU hit: no further read
    assert r.records_read == 1 and len(reads) == 1


def test_id_must_be_content_hash(tmp_path, envs):
    with EnvStore.open(tmp_path / "s", "a") as s:
        with pytest.raises(StoreError, match="content hash"):
            s.add(envs[0].model_copy(update={"id": "0" * 32}))
        assert s.add(envs[0].model_copy(update={"id": ""})) is True  # an empty id is derivable
        assert s.ids() == [envs[0].id]


def test_a_dry_runs_environments_need_allow_scripted(tmp_path, envs, capsys):
    """Environments a scripted responder made (no model) are refused unless the writer asks for them;
    a refused batch writes nothing."""
    from env_registry.cli import main

    scripted = [
        e.model_copy(
            update={"provenance": e.provenance.model_copy(update={"scripted": "data_synth.env.canned:respond"})}
        )
        for e in envs[:2]
    ]
    with EnvStore.open(tmp_path / "s", "a") as s:
        with pytest.raises(StoreError, match="made by a dry run: data_synth.env.canned:respond answered"):
            s.add_many([envs[2], *scripted])
        assert len(s) == 0
    with EnvStore.open(tmp_path / "s", "a", allow_scripted=True) as s:
        assert s.add_many(scripted) == 2
    with EnvStore.open(tmp_path / "s") as s:
        assert s.get(scripted[0].id).provenance.scripted == "data_synth.env.canned:respond"
    records = tmp_path / "in.jsonl"
    records.write_text(scripted[0].to_json() + "\n")
    assert main(["--store", str(tmp_path / "t"), "-q", "add", "--no-replay", str(records)]) == 2
    assert "--allow-scripted" in capsys.readouterr().err
    assert main(["--store", str(tmp_path / "t"), "-q", "add", "--no-replay", "--allow-scripted", str(records)]) == 0


def test_modes_and_locking(tmp_path, envs):
    path = tmp_path / "s"
    with pytest.raises(FileNotFoundError, match="no environment store"):
        EnvStore.open(path)
    with EnvStore.open(path, "a") as w:
        with pytest.raises(StoreLocked, match="one writer"):
            EnvStore.open(path, "a")
        w.add(envs[0])
        r = EnvStore.open(path)  # readers take no lock
        with pytest.raises(StoreError, match="read-only"):
            r.add(envs[1])
        with pytest.raises(StoreError, match="cannot be pickled"):
            pickle.dumps(w)
    assert EnvStore.open(path, "a").add(envs[1])  # the lock was released on close
    clone = pickle.loads(pickle.dumps(EnvStore.open(path)))
    assert clone.mode == "r" and clone.get(envs[1].id) == envs[1]


def test_torn_index_tail_is_ignored_then_repaired(tmp_path, envs):
    path = _fill(tmp_path / "s", envs[:10])
    with open(path / "index.bin", "ab") as f:
        f.write(b"\x01" * 20)  # a crash mid index write
    r = EnvStore.open(path)
    assert len(r) == 10 and r.get(envs[9].id) == envs[9]
    with EnvStore.open(path, "a") as w:
        assert w.recovery.index_bytes_dropped == 20
        assert w.add_many(envs[10:15]) == 5
    assert (path / "index.bin").stat().st_size == 15 * store_mod._RECORD_SIZE
    assert EnvStore.open(path).ids() == [e.id for e in envs[:15]]


def test_unindexed_shard_tail_is_recovered_and_torn_line_quarantined(tmp_path, envs):
    path = _fill(tmp_path / "s", envs[:5])
    shard = path / "shards" / "00000.jsonl"
    size_before = shard.stat().st_size
    with open(shard, "ab") as f:  # crash after the shard write, before the index write ...
        f.write(envs[5].to_json().encode() + b"\n")
        f.write(envs[6].to_json().encode()[:200])  # ... and a second record torn mid-line
    assert len(EnvStore.open(path)) == 5  # readers trust only the index
    with EnvStore.open(path, "a") as w:
        assert w.recovery.reindexed == 1
        assert w.recovery.quarantined_bytes == 200
        assert w.add(envs[6]) is True  # the torn one can simply be added again
    assert shard.stat().st_size == size_before + len(envs[5].to_json()) + 1 + len(envs[6].to_json()) + 1
    assert len(list((path / "quarantine").iterdir())) == 1
    r = EnvStore.open(path)
    assert r.ids() == [e.id for e in envs[:7]] and r.get(envs[6].id) == envs[6]


def test_corruption_before_the_tail_is_refused(tmp_path, envs):
    path = _fill(tmp_path / "s", envs[:4])
    data = bytearray((path / "index.bin").read_bytes())
    data[store_mod._RECORD_SIZE + 3] ^= 0xFF  # flip a byte of record 1 of 4
    (path / "index.bin").write_bytes(bytes(data))
    with pytest.raises(StoreCorrupt, match="record 1 has a bad checksum"):
        EnvStore.open(path)


def _crashing_writer(path, envs, crash_after):
    """Child: add envs in batches, then die (os._exit) in the middle of an index write."""
    real = EnvStore._write_all
    calls = {"n": 0}

    def write_all(fd, data):
        calls["n"] += 1
        if calls["n"] == crash_after:
            real(fd, data[: len(data) // 2])
            os._exit(3)
        real(fd, data)

    EnvStore._write_all = staticmethod(write_all)
    with EnvStore.open(path, "a") as s:
        for i in range(0, len(envs), 7):
            s.add_many(envs[i : i + 7])


def test_crash_mid_append_then_rerun_loses_and_duplicates_nothing(tmp_path, envs):
    path = tmp_path / "s"
    child = mp.get_context("fork").Process(target=_crashing_writer, args=(path, envs, 6))  # 3rd batch's index
    child.start()
    child.join(60)
    assert child.exitcode == 3
    survived = EnvStore.open(path).ids()
    # Two whole batches, plus the complete index records of the torn third batch (their shard
    # bytes were written first): always a prefix, never a partial record.
    assert 14 <= len(survived) < 21 and survived == [e.id for e in envs[: len(survived)]]
    with EnvStore.open(path, "a") as s:  # rerun the same job
        assert s.recovery.repaired
        s.add_many(envs)
    r = EnvStore.open(path)
    assert r.ids() == [e.id for e in envs] and all(r.get(e.id) == e for e in envs)


def _reader(path, ids, q):
    try:
        r = EnvStore.open(path, cache_size=8)
        rng = random.Random(os.getpid())
        for _ in range(300):
            env_id = rng.choice(ids)
            assert r.get(env_id).id == env_id
        r.refresh()
        q.put(("ok", len(r)))
    except Exception as exc:  # reported to the parent, which fails the test
        q.put(("error", repr(exc)))


def test_concurrent_readers_while_writing(tmp_path, envs):
    path = _fill(tmp_path / "s", envs[:30])
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    readers = [ctx.Process(target=_reader, args=(path, [e.id for e in envs[:30]], q)) for _ in range(3)]
    for p in readers:
        p.start()
    with EnvStore.open(path, "a") as w:
        for e in envs[30:]:
            w.add(e)
    results = [q.get(timeout=60) for _ in readers]
    for p in readers:
        p.join(30)
    assert all(kind == "ok" and 30 <= n <= 60 for kind, n in results), results
    late = EnvStore.open(path)
    assert len(late) == 60
