"""The TGT-text learner: a small procedure learned from its step names, the embedding cache, and the two errors a
user meets when the text encoder is missing or cannot be loaded (the real all-MiniLM-L6-v2 of the ``text`` extra)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from graphs.common.errors import InputError
from graphs.task_graph import load_graph
from tests.cli_errors import cli_error
from tgml import text_embeddings
from tgml.bench.prego import build_graph
from tgml.learners.tgt_text.config import TgtTextConfig
from tgml.learners.tgt_text.model import distinctiveness_loss
from tgml.learners.tgt_text.train import beta_schedule, train_tgt_text
from tgml.text_embeddings import cache_path, read_cached, step_embeddings, write_cached
from tgml.tgml_cli import main

# Making coffee: the water is boiled, then poured, then the coffee is drunk; grinding beans happens at any time.
STEPS = {1: "boil the water in the kettle", 2: "grind the coffee beans", 3: "pour the water over the ground coffee",
         4: "drink the coffee from the cup"}
ORDERS = [(2, 1, 3, 4), (1, 2, 3, 4), (1, 3, 2, 4), (1, 3, 4, 2), (2, 1, 3, 4)]


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets an empty embedding cache of its own (never the user's ~/.cache)."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    yield folder / "mistake-detection" / "text-embeddings"


@pytest.fixture(scope="module")
def coffee_embeddings() -> np.ndarray:
    """The real encoder's embeddings of the step names (loaded once for the module)."""
    return text_embeddings.encode_texts(list(STEPS.values()))


def ann_file(path: Path) -> Path:
    """Write an annotation file of the coffee executions `ORDERS` at ``path``."""
    videos = {f"v{k}": {"scenario": "coffee", "recording_id": f"v{k}", "segments": [{"step_id": s} for s in order]}
              for k, order in enumerate(ORDERS)}
    taxonomy = {"coffee": {str(i): {"name": name, "id": i} for i, name in STEPS.items()}}
    path.write_text(json.dumps({"annotations": videos, "taxonomy": taxonomy}))
    return path


def test_a_small_procedure_is_learned_from_its_step_names(coffee_embeddings: np.ndarray) -> None:
    result = train_tgt_text(ORDERS, list(STEPS), list(STEPS.values()), TgtTextConfig(epochs=200), "coffee",
                                  embeddings=coffee_embeddings)
    graph = result.graph
    # Edges point from a step to what it needs; grinding needs nothing and nothing needs it.
    assert set(graph.edges()) == {(1, "START"), (2, "START"), (3, 1), (4, 3), ("END", 2), ("END", 4)}
    assert result.sequence_accuracy == 1.0
    assert graph.info["method"] == "tgt-text" and graph.weights is not None
    # The key-step rows of Z are distributions (less what little mass the auxiliary β node keeps).
    assert np.allclose(graph.weights[1:-1].sum(axis=1), 1.0, atol=1e-2)


def test_the_same_seed_gives_the_same_graph_and_the_benchmark_builder_agrees(coffee_embeddings: np.ndarray) -> None:
    class Split:
        scenario = "coffee"
        step_ids = tuple(STEPS)
        step_names = tuple(STEPS.values())
        train = tuple(ORDERS)

    config = TgtTextConfig(epochs=30, seed=7)
    first = train_tgt_text(ORDERS, list(STEPS), list(STEPS.values()), config, "coffee",
                                 embeddings=coffee_embeddings).graph
    built = build_graph("tgt-text", Split(), {"epochs": 100}, seed=7, epochs=30)  # type: ignore[arg-type]
    assert first.weights is not None and built.weights is not None
    assert np.allclose(first.weights, built.weights, atol=1e-5) and np.array_equal(first.adjacency, built.adjacency)
    with pytest.raises(InputError, match="setting 'width_typo': not one of"):
        build_graph("tgt-text", Split(), {"width_typo": 3}, seed=7)  # type: ignore[arg-type]


def test_embeddings_are_cached_and_a_damaged_entry_is_recomputed(own_cache: Path,
                                                                  coffee_embeddings: np.ndarray) -> None:
    texts = list(STEPS.values())
    computed = step_embeddings(texts)
    entry = cache_path(texts, text_embeddings.DEFAULT_ENCODER)
    assert entry.parent == own_cache and entry.is_file()
    assert np.allclose(computed, coffee_embeddings, atol=1e-5) and computed.shape == (4, 384)

    # A valid entry is what is returned: the encoder is not asked again.
    marked = np.full_like(computed, 0.5)
    write_cached(entry, texts, text_embeddings.DEFAULT_ENCODER, marked)
    assert np.array_equal(step_embeddings(texts), marked)

    # Damaged (truncated) or belonging to other texts: refused, recomputed, and the entry is repaired.
    entry.write_bytes(entry.read_bytes()[:40])
    assert read_cached(entry, texts, text_embeddings.DEFAULT_ENCODER) is None
    assert np.allclose(step_embeddings(texts), coffee_embeddings, atol=1e-5)
    repaired = read_cached(entry, texts, text_embeddings.DEFAULT_ENCODER)
    assert repaired is not None and np.allclose(repaired, coffee_embeddings, atol=1e-5)
    write_cached(entry, texts[::-1], text_embeddings.DEFAULT_ENCODER, marked)
    assert read_cached(entry, texts, text_embeddings.DEFAULT_ENCODER) is None
    assert cache_path(texts[::-1], text_embeddings.DEFAULT_ENCODER) != entry


def test_tgml_train_tgt_text_writes_a_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann = ann_file(tmp_path / "ann.json")
    cfg = tmp_path / "tgt.toml"
    cfg.write_text("epochs = 40\nwidth = 32\n")
    out = tmp_path / "coffee.json"
    assert main(["train", "--annotations", str(ann), "--scenario", "coffee", "--out", str(out), "--method",
                 "tgt-text", "--config", str(cfg), "--seed", "3", "--quiet"]) == 0
    graph = load_graph(out)
    assert graph.info["method"] == "tgt-text" and graph.info["config"]["width"] == 32
    assert graph.info["config"]["seed"] == 3 and graph.info["epochs_run"] == 40
    assert "coffee: tgt-text, 40 epochs" in capsys.readouterr().out
    err = cli_error(main, ["train", "--annotations", str(ann), "--scenario", "coffee", "--out", str(out),
                           "--method", "tgt-text", "--beta", "0.1"], capsys)
    assert "setting 'beta' does not apply to --method tgt-text" in err


def test_a_missing_text_extra_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # What an installation without the extra sees: the import of sentence-transformers fails.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    text_embeddings.load_encoder.cache_clear()
    out = tmp_path / "g.json"
    err = cli_error(main, ["train", "--annotations", str(ann_file(tmp_path / "ann.json")), "--scenario", "coffee",
                           "--out", str(out), "--method", "tgt-text", "--quiet"], capsys)
    text_embeddings.load_encoder.cache_clear()
    assert "optional extra 'text'" in err and "pip install 'mistake-detection[text]'" in err
    assert not out.exists()


def test_a_text_extra_too_old_to_import_is_told_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # sentence-transformers 2.2 under huggingface_hub >= 0.26 (which removed cached_download): the extra is installed,
    # and "needs the optional extra 'text'" sent the user to a pip install that changed nothing.
    fake = tmp_path / "site" / "sentence_transformers"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"cannot import name 'cached_download' from "
                                      "'huggingface_hub'\")\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "sentence_transformers", raising=False)
    text_embeddings.load_encoder.cache_clear()
    err = cli_error(main, ["train", "--annotations", str(ann_file(tmp_path / "ann.json")), "--scenario", "coffee",
                           "--out", str(tmp_path / "g.json"), "--method", "tgt-text", "--quiet"], capsys)
    text_embeddings.load_encoder.cache_clear()
    assert err.startswith("error: the tgt-text learner: sentence_transformers is installed but does not import "
                          "(cannot import name 'cached_download' from 'huggingface_hub'); pip install --upgrade ")
    assert "optional extra" not in err


def test_an_encoder_that_cannot_be_loaded_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "config.json").write_text("{broken")
    cfg = tmp_path / "tgt.toml"
    cfg.write_text(f"encoder = {json.dumps(str(not_a_model))}\n")
    err = cli_error(main, ["train", "--annotations", str(ann_file(tmp_path / "ann.json")), "--scenario", "coffee",
                           "--out", str(tmp_path / "g.json"), "--method", "tgt-text", "--config", str(cfg), "--quiet"],
                    capsys)
    assert f"text encoder '{not_a_model}': cannot be loaded" in err


def test_settings_are_validated() -> None:
    with pytest.raises(InputError, match="heads"):
        TgtTextConfig(width=10, heads=4)
    with pytest.raises(InputError, match="edge_threshold"):
        TgtTextConfig(edge_threshold="1/3")
    with pytest.raises(InputError, match="epochs"):
        TgtTextConfig(epochs=0)


def test_beta_follows_the_paper_schedule() -> None:
    betas = beta_schedule(3000, 1.0, 0.05, 30)
    assert betas[0] == 1.0 and betas[98] == 1.0  # constant until the first update, at epoch 100
    assert betas[99] == pytest.approx(1.0 + (0.05 - 1.0) * 99 / 3000)
    assert np.all(np.diff(betas) <= 0) and betas[-1] == pytest.approx(0.05, abs=1e-3)
    assert np.all(beta_schedule(50, 0.3, 0.05, 0) == 0.3)


def test_distinctiveness_is_low_for_distinct_nodes_and_high_for_collapsed_ones() -> None:
    distinct = torch.eye(5) * 3.0
    collapsed = torch.ones(5, 3)
    assert distinctiveness_loss(collapsed, 2.0).item() == pytest.approx(5 * np.log(5), rel=1e-5)  # uniform choice
    assert distinctiveness_loss(distinct, 2.0).item() < distinctiveness_loss(collapsed, 2.0).item()
