"""Detector checkpoints: round trip, and one-line refusals of files that are not (or do not fit) a detector."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from graphs.common.errors import InputError
from recognition.checkpoint import DetectorCheckpoint, load_detector, save_detector
from recognition.evidence import EvidenceModel
from recognition.model import MiniROAD, MiniROADConfig
from recognition.segmenter import SegmenterConfig
from streaming.demo.paths import default_demo_paths
from streaming.stream_detect_cli import main as stream_detect
from tests.cli_errors import cli_error

CFG = MiniROADConfig(input_dim=20, embed_dim=16, hidden_dim=8, num_classes=4)
NAMES = ("background", "a", "b", "c")
STEP_IDS = (None, 7, 3, 5)
_, DETECTOR = default_demo_paths()


def _saved(tmp_path: Path) -> tuple[MiniROAD, Path]:
    torch.manual_seed(0)
    model = MiniROAD(CFG).eval()
    path = tmp_path / "det.pt"
    save_detector(path, model, NAMES, STEP_IDS, "builtin-tiny", 4.0, {"test_map": 0.5})
    return model, path


def test_round_trip_keeps_weights_and_metadata(tmp_path: Path) -> None:
    model, path = _saved(tmp_path)
    loaded, meta = load_detector(path)
    assert not loaded.training
    assert meta == DetectorCheckpoint(CFG, NAMES, STEP_IDS, "builtin-tiny", 4.0, {"test_map": 0.5})
    x = torch.randn(1, 9, CFG.input_dim)
    with torch.inference_mode():
        torch.testing.assert_close(loaded(x)[0], model(x)[0])


def test_mismatched_backbone_is_refused_with_the_expected_extractor(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    _, meta = load_detector(path)
    meta.check_features(20, "builtin-tiny")
    with pytest.raises(InputError, match="feature width 2048 does not match .* input_dim 20 .*'builtin-tiny'"):
        meta.check_features(2048, source="stream")
    with pytest.raises(InputError, match="'tsn-resnet50' but the detector was trained on 'builtin-tiny'"):
        meta.check_features(20, "tsn-resnet50")


def test_not_a_checkpoint(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00not a torch file")
    with pytest.raises(InputError, match=r"garbage\.pt: not a detector checkpoint: expected a \.pt file written by "
                                         r"recognition-train") as refused:
        load_detector(garbage)
    assert "torch" not in str(refused.value).lower()  # torch's loader text speaks of its options, not of the user's
    with pytest.raises(InputError, match="detector checkpoint not found"):
        load_detector(tmp_path / "missing.pt")
    other = tmp_path / "other.pt"
    torch.save({"format": "something-else"}, other)
    with pytest.raises(InputError, match='field \'format\' is "something-else"'):
        load_detector(other)
    listed = tmp_path / "list.pt"  # a list has no fields: "field 'format' is a list" named one it does not have
    torch.save([1, 2, 3], listed)
    with pytest.raises(InputError, match="list.pt: not a detector checkpoint: it holds a list, not the object of "
                                         "fields recognition-train writes"):
        load_detector(listed)


def test_version_and_tampered_contents_are_refused(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    data["version"] = 99
    torch.save(data, path)
    with pytest.raises(InputError, match="unsupported checkpoint version 99"):
        load_detector(path)
    data["version"] = 1
    data["config"]["hidden_dim"] = 9  # weights no longer fit the config
    torch.save(data, path)
    with pytest.raises(InputError, match="weights do not fit the stored config"):
        load_detector(path)
    data["config"]["hidden_dim"] = 8
    data["class_names"] = ["background", "a"]
    torch.save(data, path)
    with pytest.raises(InputError, match="2 class names for 4 classes"):
        load_detector(path)


def test_truncated_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    # A copy cut short (full disk, interrupted download) failed inside torch's zip reader with a bare OSError.
    _, path = _saved(tmp_path)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(InputError, match=r"cut\.pt: not a detector checkpoint"):
        load_detector(cut)


def test_a_checkpoint_with_flipped_bytes_in_its_weights_is_refused(tmp_path: Path) -> None:
    # torch's reader does not check the archive's CRCs: bytes flipped in the weights gave a detector that loaded,
    # stayed finite and recognised nothing, without a word.
    _, path = _saved(tmp_path)
    with zipfile.ZipFile(path) as archive:
        record = max(archive.infolist(), key=lambda info: info.file_size)  # the largest tensor
    data = bytearray(path.read_bytes())
    start = record.header_offset + 30 + len(record.filename.encode()) + 64  # past its local header (and extra field)
    data[start:start + 16] = bytes(b ^ 0x5A for b in data[start:start + 16])
    flipped = tmp_path / "flipped.pt"
    flipped.write_bytes(bytes(data))
    with pytest.raises(InputError, match=rf"flipped\.pt: a damaged copy: its record {record.filename} fails its "
                                         r"checksum \(CRC\); not read"):
        load_detector(flipped)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("class_step_ids", [None, 7.5, 3, 5], r"class_step_ids\[1\] = 7.5 must be an integer or null"),
        ("class_step_ids", [None, True, 3, 5], r"class_step_ids\[1\] = true must be an integer or null"),
        ("class_names", "abcd", "field 'class_names' must be a list"),
        ("class_names", ["background", 1, "b", "c"], r"class_names\[1\] = 1 must be a string"),
        # Sent on the wire as a step's name: one that shows nothing was loaded.
        ("class_names", ["background", "\u200b", "b", "c"], r"class_names\[1\] holds no visible character"),
        ("info", "notes", "field 'info' must be an object"),
        ("fps", True, "fps = true must be a positive number"),
    ],
)
def test_wrongly_typed_fields_are_refused_not_coerced(tmp_path: Path, key: str, value: object, message: str) -> None:
    # int(7.5) == 7 and str(1) == "1": coercing would load a detector that talks about the wrong key-steps.
    _, path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    data[key] = value
    torch.save(data, path)
    with pytest.raises(InputError, match=message):
        load_detector(path)


@pytest.mark.parametrize(("key", "message"), [
    # A deleted fps said "fps = 0.0 must be a positive number": a value nobody wrote.
    ("fps", "field 'fps' is missing"),
    ("feature_extractor", "field 'feature_extractor' is missing"),
    # "field 'format' is null" and "unsupported checkpoint version None": values nobody wrote.
    ("format", "field 'format' is missing (expected \"miniroad-detector\")"),
    ("version", "field 'version' is missing (this program reads version 1)"),
])
def test_a_missing_field_is_named_missing_not_given_a_value(tmp_path: Path, key: str, message: str) -> None:
    _, path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    del data[key]
    torch.save(data, path)
    with pytest.raises(InputError, match=f"^{re.escape(str(path))}: {re.escape(message)}$"):
        load_detector(path)


def test_a_saved_state_dict_is_said_to_be_bare_weights(tmp_path: Path) -> None:
    # torch.save(model.state_dict()), the usual way to save a model, was refused as "field 'format' is null".
    path = tmp_path / "weights.pt"
    torch.save(MiniROAD(CFG).state_dict(), path)
    with pytest.raises(InputError, match=f"^{path}: not a detector checkpoint: it holds bare model weights \\(a "
                                         "state_dict\\), not the object of fields recognition-train writes around "
                                         "them$"):
        load_detector(path)


@pytest.mark.parametrize(("change", "message"), [
    # MiniROADConfig's TypeError: "bad field 'config' (MiniROADConfig.__init__() got an unexpected keyword argument".
    (lambda c: c.update(bogus=1), "field 'config': key 'bogus': not one of the 7 known (done_head, "
                                  "dropout, embed_dim, hidden_dim, input_dim, motion_lag, num_classes)"),
    # The default hidden_dim (1024) was taken: "weights do not fit the stored config (gru.weight_ih_l0 has shape...".
    (lambda c: c.pop("hidden_dim"), "field 'config' lacks 'hidden_dim'"),
    # Named as a field of MiniROADConfig, a class the file never names.
    (lambda c: c.update(hidden_dim=1.5), "field 'config': hidden_dim = 1.5: must be a positive integer"),
])
def test_a_config_key_unknown_missing_or_wrong_is_named_as_the_files_field(
    tmp_path: Path, change: Callable[[dict[str, object]], object], message: str
) -> None:
    _, path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    change(data["config"])
    torch.save(data, path)
    with pytest.raises(InputError, match=f"^{path}: {re.escape(message)}$"):
        load_detector(path)


def test_non_finite_weights_are_refused(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    data["state_dict"]["head.1.weight"][0, 0] = float("nan")
    torch.save(data, path)
    with pytest.raises(InputError, match="weights 'head.1.weight' contain NaN or infinity"):
        load_detector(path)


def test_evidence_is_kept_checked_and_optional(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MiniROAD(CFG).eval()
    path = tmp_path / "det.pt"
    steps = [s for s in STEP_IDS if s is not None]
    evidence = EvidenceModel.default(steps, window_s=0.5)
    save_detector(path, model, NAMES, STEP_IDS, "builtin-tiny", 4.0, {}, None, evidence)
    _, meta = load_detector(path)
    assert meta.evidence == evidence
    # Checkpoints written before the field existed load without evidence.
    data = torch.load(path, weights_only=True)
    good = data.pop("evidence")
    torch.save(data, path)
    assert load_detector(path)[1].evidence is None
    for bad, message in ((good | {"miss_rates": [0.1, float("nan"), 0.0]},
                          r"miss_rates\[1\] = nan: expected a number in \[0, 1\]"),
                         ([0.1], "field 'evidence': expected an object"),
                         (good | {"false_rates": [0.1, 0.2]}, "false_rates has 2 values for 3 steps"),
                         (good | {"step_ids": [97, 98, 99]}, "evidence names a step that is not one of its classes"),
                         (good | {"miss_rates": "x"}, "field 'evidence': miss_rates must be a list$"),  # said it twice
                         # a ring of window x fps rows each live: 1e9 s asked for 261 GiB, a traceback
                         (good | {"window_s": 1e9},
                          r"window_s = 1000000000.0: expected a number in \(0, 600\] \(seconds\)"),
                         (good | {"detection_window_s": 1e300}, r"detection_window_s = 1e\+300: expected a number in"),
                         # only checked finite: every probability NaN, and the run ended with status 0
                         (good | {"done_slope": 1e308}, r"done_slope = 1e\+308: expected a number in \[0, 1e\+06\]")):
        data["evidence"] = bad
        torch.save(data, path)
        with pytest.raises(InputError, match=rf"det\.pt: (?!.*field 'evidence': field).*{message}"):
            load_detector(path)


def test_a_checkpoint_saved_without_crcs_still_loads(tmp_path: Path) -> None:
    # torch can be told not to compute them (every CRC 0): the check would have refused every record of it.
    from torch.utils import serialization

    serialization.config.save.compute_crc32 = False
    try:
        model, path = _saved(tmp_path)
    finally:
        serialization.config.save.compute_crc32 = True
    with zipfile.ZipFile(path) as archive:
        assert not any(info.CRC for info in archive.infolist())
    loaded, _ = load_detector(path)
    x = torch.randn(1, 9, CFG.input_dim)
    with torch.inference_mode():
        torch.testing.assert_close(loaded(x)[0], model(x)[0])


def _stored(tmp_path: Path, key: str, value: object) -> Path:
    """The checkpoint of `_saved` with one top-level field changed, as a hand edit or a damaged copy gives it."""
    _, path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    data[key] = value
    torch.save(data, path)
    return path


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        # Each was refused only when a stream started, naming no file or a class the user never wrote:
        # "ReaderConfig.fps = 1000000000.0 must be in (0, 1000]", "SegmenterConfig.background = -1: must be a class
        # index or None", "detector checkpoint: bad info.segmenter (... multiple values for keyword argument 'fps')".
        ("fps", 1e9, "fps = 1000000000.0 must be a positive number at most 1000"),
        ("info", {"segmenter": {"background": -1}}, "info.segmenter.background = -1: expected an integer in "
         "0..2147483647 (a class index; none: no background class)"),
        ("info", {"segmenter": {"min_duration": "x"}},
         'info.segmenter.min_duration = "x": expected a number in (0, 86400] (seconds)'),
        # No upper limit: a stream waited for ever to announce a step.
        ("info", {"segmenter": {"onset_frames": 10**12}},
         "info.segmenter.onset_frames = 1000000000000: expected an integer in 0..86400000 (0: off)"),
        ("info", {"segmenter": "x"}, "info.segmenter must be an object, got a string"),
        ("info", {"segmenter": {"fps": 3.0}},
         "info.segmenter.fps = 3.0: not a segmenter setting (the segmenter runs at the detector's fps, 4)"),
        ("info", {"segmenter": {"min_durations": 1.0}},
         "info.segmenter: setting 'min_durations': not one of the 8 known (background, class_min_duration, max_delay, "
         "min_duration, min_run, onset_frames, switch_margin, threshold); "
         "did you mean 'min_duration'?"),
        # Accepted without a word: a class the detector does not have.
        ("info", {"segmenter": {"background": 4}},
         "info.segmenter.background = 4: must be a class index of the detector (0..3) or null"),
        ("info", {"segmenter": {"class_min_duration": (0.5, 0.5)}},
         "info.segmenter.class_min_duration has 2 entries for a detector of 4 classes"),
        # One of a pair stored, the other at its default: the stored one is at fault. The check fails on the other,
        # which the error named as if the file held it ("info.segmenter.min_duration = 0.5: ...").
        ("info", {"segmenter": {"min_run": 100.0}},
         "info.segmenter.min_run = 100: expected a number <= min_duration (0.5, its default)"),
        ("info", {"segmenter": {"min_duration": 5.0}}, "info.segmenter.min_duration = 5: expected a number <= 1, half "
         "of max_delay (2, its default), so that a clean short step is never cut"),
        ("info", {"segmenter": {"min_run": 100.0, "min_duration": 0.5}},
         "info.segmenter.min_duration = 0.5: expected a number >= min_run (100)"),
    ],
)
def test_segmenter_settings_and_rate_are_refused_when_read_naming_the_file_and_field(
    tmp_path: Path, key: str, value: object, line: str
) -> None:
    path = _stored(tmp_path, key, value)
    with pytest.raises(InputError) as refused:
        load_detector(path)
    assert str(refused.value) == f"{path}: {line}"


def test_stored_segmenter_settings_load_as_written(tmp_path: Path) -> None:
    settings = {"min_run": 0.3, "min_duration": 0.6, "background": None, "class_min_duration": (0.5, 0.5, 0.8, 0.5)}
    _, meta = load_detector(_stored(tmp_path, "info", {"segmenter": settings}))
    assert meta.segmenter_config() == SegmenterConfig(fps=4.0, **settings)  # type: ignore[arg-type]
    assert DetectorCheckpoint(CFG, NAMES, STEP_IDS, "builtin-tiny", 4.0).segmenter_config() == SegmenterConfig(fps=4.0)
    # Stored as a list (a hand edit, a JSON round trip): it was refused as "must be a non-empty list".
    listed = {**settings, "class_min_duration": [0.5, 0.5, 0.8, 0.5]}
    _, meta = load_detector(_stored(tmp_path, "info", {"segmenter": listed}))
    assert meta.segmenter_config() == SegmenterConfig(fps=4.0, **settings)  # type: ignore[arg-type]


def test_stream_detect_names_the_checkpoint_of_bad_segmenter_settings(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    data = torch.load(DETECTOR, weights_only=True)
    data["info"]["segmenter"] = {"background": 99}
    bad = tmp_path / "det.pt"
    torch.save(data, bad)
    assert cli_error(stream_detect, ["--video", "demo", "--detector", str(bad), "--jsonl"], capsys) == (
        f"error: {bad}: info.segmenter.background = 99: must be a class index of the detector (0..6) or null")


@pytest.mark.parametrize(("scale", "line"), [
    ("5.2", "info.feature_scale must be an object, got a string"),
    ({"largest": -1}, "info.feature_scale.largest = -1: expected a finite number >= 0 (the largest absolute value of "
     "the features it was trained on)"),
    ({"largest": float("nan")}, "info.feature_scale.largest = nan: expected a finite number >= 0"),
    ({"largest": True}, "info.feature_scale.largest = true: expected a finite number >= 0"),
    ({}, "info.feature_scale.largest = null: expected a finite number >= 0"),
])
def test_the_training_features_scale_is_checked_when_read_naming_the_file_and_field(
    tmp_path: Path, scale: object, line: str
) -> None:
    # What feature files are compared with (`scale_mismatch`): a damaged one is refused when the file is read, not
    # when the first file is fed to the detector.
    path = _stored(tmp_path, "info", {"feature_scale": scale})
    with pytest.raises(InputError) as refused:
        load_detector(path)
    assert str(refused.value).startswith(f"{path}: {line}")


def test_the_training_features_scale_loads_as_written_and_an_older_checkpoint_has_none(tmp_path: Path) -> None:
    _, meta = load_detector(_stored(tmp_path, "info", {"feature_scale": {"largest": 5.21}}))
    assert meta.training_scale() == 5.21
    _, path = _saved(tmp_path)  # written without it, as every checkpoint before it was: it loads, nothing compared
    assert load_detector(path)[1].training_scale() is None
