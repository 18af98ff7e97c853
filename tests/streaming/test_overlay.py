"""The annotated frames (``--annotate-out``): the alert readable whole, whatever the frame's size."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from streaming.messages import Alert, StepEvent
from streaming.overlay import ALERT_RED, BAND, MARGIN, OverlayState, _lines, _scale, band_height, draw_overlay


def alerted_state() -> OverlayState:
    state = OverlayState(current=("attach_shade", 0.93), done=["place_base", "insert_bulb"])
    alert = Alert("cam0", 7, 1.0, "cam0#1", "s", 2, "attach_shade", 1, (1,), ("attach_pole",), False, 0.9, False, 1,
                  "attach_pole", 1.0, "binary")
    state.alerts.append((0.0, alert))
    return state


def red_rows(frame: np.ndarray) -> int:
    """How many rows at the bottom of a BGR frame are the alert's red."""
    red = np.all(frame == ALERT_RED, axis=2).mean(axis=1) > 0.5  # (H,) rows mostly red (text is white)
    return int(np.argmin(red[::-1])) if not red.all() else len(red)


@pytest.mark.parametrize(("width", "height", "lines"), [(160, 120, 2), (640, 480, 1)])
def test_the_whole_alert_is_written_on_small_frames_too(width: int, height: int, lines: int) -> None:
    # On a 160x120 frame "MISTAKE: attach_shade before attach_pole" was cut after "attach": the missing
    # pre-condition, the point of the alert, could not be read.
    text = "MISTAKE: attach_shade before attach_pole"
    wrapped = _lines(text, width)
    assert " ".join(wrapped) == text and len(wrapped) == lines
    assert all(cv2.getTextSize(line, cv2.FONT_HERSHEY_SIMPLEX, _scale(width), 1)[0][0] <= width - 2 * MARGIN
               for line in wrapped)
    frame = draw_overlay(np.full((height, width, 3), 120, np.uint8), alerted_state(), 0.5)
    band = red_rows(frame)
    assert band >= band_height(height) and (band > band_height(height)) == (lines > 1)  # the band grows with it


def test_what_three_lines_cannot_hold_is_cut_and_says_so() -> None:
    text = "MISTAKE: attach_shade before attach_pole, stake_corners, unfold_tent, insert_poles_into_sleeves"
    wrapped = _lines(text, 160)
    assert len(wrapped) == 3 and wrapped[-1].endswith(" ...") and text.startswith(" ".join(wrapped)[:-4].rstrip())
    assert all(cv2.getTextSize(line, cv2.FONT_HERSHEY_SIMPLEX, _scale(160), 1)[0][0] <= 160 - 2 * MARGIN
               for line in wrapped)


def test_a_step_name_longer_than_a_line_is_cut_after_its_underscores() -> None:
    # Wrapping at spaces alone left "fill_the_electric_kettle_with_cold_tap_water" running off a 160-pixel frame.
    wrapped = _lines("MISTAKE: boil_water before fill_the_electric_kettle_with_cold_tap_water", 160)
    assert wrapped == ["MISTAKE: boil_water before", "fill_the_electric_kettle_with_", "cold_tap_water"]
    assert all(cv2.getTextSize(line, cv2.FONT_HERSHEY_SIMPLEX, _scale(160), 1)[0][0] <= 160 - 2 * MARGIN
               for line in wrapped)


def test_a_step_recognised_again_is_listed_done_once_in_the_order_first_done() -> None:
    # The band's "done:" took every key-step event: two steps each recognised twice read "lay_photo, open_box,
    # lay_photo, open_box", where the view and the checker's status list each step once.
    state = OverlayState()
    ids = {"lay_photo": 3, "open_box": 0, "add_coins": 2}
    for k, name in enumerate(["lay_photo", "open_box", "lay_photo", "open_box", "add_coins"]):
        state.apply(StepEvent("cam0", k + 1, 1.0 + k, ids[name], name, 2.0 * k, 2.0 * k + 1, 0.9, k, run="s"),
                    float(k))
    assert state.done == ["lay_photo", "open_box", "add_coins"]


def dark_rows(frame: np.ndarray) -> int:
    """How many rows at the top of a BGR frame are the status band's dark grey (read in the left margin, where no
    text is written)."""
    dark = np.all(frame[:, 0] == BAND, axis=1)
    return int(np.argmin(dark)) if not dark.all() else len(dark)


@pytest.mark.parametrize(("width", "height"), [(160, 120), (640, 480), (1280, 720)])
def test_the_status_band_leaves_the_picture_to_the_alert_on_small_frames(width: int, height: int) -> None:
    # On a 160x120 frame the status band wrapped to three lines and the alert's took two more: half the picture.
    state = alerted_state()
    state.done = ["place_base_on_the_table", "insert_bulb_into_socket", "attach_pole_to_base", "plug_in_lamp"]
    frame = draw_overlay(np.full((height, width, 3), 120, np.uint8), state, 0.5)
    assert dark_rows(frame) <= max(height // 4, band_height(height) + 8)
    assert red_rows(frame) >= band_height(height)  # the alert is still drawn whole below
