"""Annotations as a table (``video,step,start,end`` per row, `graphs.annotation_csv`): what a labelling tool or a
spreadsheet exports reads as the JSON would, and what only a table gets wrong is refused naming its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphs import InputError
from graphs.annotations import load_annotations, time_order

HEADER = "video,step,start,end"
ROWS = ("run1,unfold,1.5,10", "run1,insert_pole,12,20", "run2,unfold,0,8", "run2,insert_pole,9,15.25")


def write(tmp_path: Path, lines: list[str] | tuple[str, ...], name: str = "tent.csv", newline: str = "\n",
          encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes((newline.join(lines) + newline).encode(encoding))
    return path


def spans(path: Path) -> dict[str, list[tuple[str, float, float]]]:
    """Each video's segments as ``(step name, start, end)`` in time order: what every command reads of a file."""
    ann = load_annotations(path)
    names = ann.taxonomy["procedure"]
    return {v.video: [(names[v.steps[k]], start, end) for k, start, end in time_order(v, str(path))]
            for v in ann.videos.values()}


EXPECTED = {"run1": [("unfold", 1.5, 10.0), ("insert_pole", 12.0, 20.0)],
            "run2": [("unfold", 0.0, 8.0), ("insert_pole", 9.0, 15.25)]}


def test_a_table_reads_as_the_json_of_the_same_segments(tmp_path: Path) -> None:
    path = write(tmp_path, [HEADER, *ROWS])
    assert spans(path) == EXPECTED
    ann = load_annotations(path)
    # Ids are the sorted names and the scenario is not the file's name: a copy of the table, its rows in another
    # order, labels the same procedure (a detector trained from one is accepted beside a graph from the other).
    assert ann.taxonomy == {"procedure": {0: "insert_pole", 1: "unfold"}}
    copy = write(tmp_path, [HEADER, *reversed(ROWS)], name="eggs.csv")
    assert load_annotations(copy).taxonomy == ann.taxonomy
    assert not any(flag for v in ann.videos.values() for flag in v.has_errors)


def test_numbered_steps_are_numbered_in_their_numbers_order(tmp_path: Path) -> None:
    # A labelling tool's "step1" .. "step10": as strings "step10" came second, and every table, graph and list
    # ordered by step id read 1, 10, 2.
    rows = [f"run1,step{k},{k},{k + 1}" for k in (10, 2, 1, 9)] + ["run1,cut01,20,21", "run1,cut1,22,23"]
    ann = load_annotations(write(tmp_path, [HEADER, *rows]))
    assert list(ann.taxonomy["procedure"].values()) == ["cut01", "cut1", "step1", "step2", "step9", "step10"]


@pytest.mark.parametrize("variant", ["no header", "windows line endings", "byte-order mark", "m:ss times",
                                     "h:mm:ss times", "units in the header", "columns in another order",
                                     "semicolons and decimal commas", "tab-separated", "comments and blank lines",
                                     "file names as videos", "excel's separator line", "excel's unicode text",
                                     "utf-16 without a mark", "utf-32", "tab-separated under .csv",
                                     "comma-separated under .tsv", "excel's tab separator line",
                                     "file paths as videos", "a file column beside the video column",
                                     "begin and stop times", "pandas float flags", "the header again",
                                     "tables with byte-order marks joined", "assembly101's flag words",
                                     "a step of two lines", "pandas' numbered columns",
                                     "pandas' numbered columns and index"])
def test_what_a_spreadsheet_writes_is_accepted(tmp_path: Path, variant: str) -> None:
    lines = [HEADER, *ROWS]
    name, newline, encoding = "tent.csv", "\n", "utf-8"
    expected = EXPECTED
    if variant == "no header":
        lines = list(ROWS)
    elif variant == "windows line endings":
        newline = "\r\n"
    elif variant == "byte-order mark":
        encoding = "utf-8-sig"
    elif variant == "m:ss times":
        lines = [HEADER, "run1,unfold,0:01.5,0:10", "run1,insert_pole,0:12,0:20", "run2,unfold,0:00,0:08",
                 "run2,insert_pole,0:09,0:15.25"]
    elif variant == "h:mm:ss times":
        lines = [HEADER, "run1,unfold,0:00:01.5,0:00:10", "run1,insert_pole,0:00:12,0:00:20",
                 "run2,unfold,0:00:00,0:00:08", "run2,insert_pole,0:00:09,0:00:15.25"]
    elif variant == "units in the header":
        lines = ["Video,Step,Start (s),End (s)", *ROWS]
    elif variant == "columns in another order":
        lines = ["start_time,end_time,step_name,recording_id"] + [
            ",".join([*row.split(",")[2:], row.split(",")[1], row.split(",")[0]]) for row in ROWS]
    elif variant == "semicolons and decimal commas":
        lines = ["video;step;start;end"] + [";".join(f.replace(".", ",") for f in row.split(",")) for row in ROWS]
    elif variant == "tab-separated":
        name, lines = "tent.tsv", [line.replace(",", "\t") for line in [HEADER, *ROWS]]
    elif variant == "file names as videos":  # what a labelling tool exports: the recording is the name's stem
        lines = [HEADER, *(row.replace("run1,", "run1.MP4,").replace("run2,", "run2.npy,") for row in ROWS)]
    elif variant == "excel's separator line":
        newline, encoding = "\r\n", "utf-8-sig"
        lines = ["sep=;", "video;step;start;end"] + [";".join(f.replace(".", ",") for f in row.split(","))
                                                     for row in ROWS]
    elif variant == "excel's unicode text":  # UTF-16 with its mark, tab-separated: read whole, not converted first
        name, encoding, newline = "tent.tsv", "utf-16", "\r\n"
        lines = [line.replace(",", "\t") for line in [HEADER, *ROWS]]
    elif variant == "utf-16 without a mark":
        encoding = "utf-16-be"
    elif variant == "utf-32":
        encoding = "utf-32"
    elif variant == "tab-separated under .csv":
        lines = [line.replace(",", "\t") for line in [HEADER, *ROWS]]
    elif variant == "comma-separated under .tsv":
        name = "tent.tsv"
    elif variant == "excel's tab separator line":
        lines = ["sep=\t", *(line.replace(",", "\t") for line in [HEADER, *ROWS])]
    elif variant == "file paths as videos":
        lines = [HEADER, *(row.replace("run1,", "/data/upload/run1.mp4,").replace("run2,", "C:\\clips\\run2.MP4,")
                           for row in ROWS)]
    elif variant == "a file column beside the video column":  # the video column names the recording, wherever
        lines = ["file,video,step,start,end", *(f"clip{k}.mp4,{row}" for k, row in enumerate(ROWS))]
    elif variant == "begin and stop times":
        lines = ["Video,Activity,Begin Time,Stop Time", *ROWS]
    elif variant == "pandas float flags":  # an integer column with an empty cell is written as floats
        lines = ["video,step,start,end,has_errors", *(row + ",0.0" for row in ROWS)]
    elif variant == "the header again":  # two tables joined: cat a.csv b.csv
        lines = [HEADER, *ROWS[:2], HEADER, *ROWS[2:]]
    elif variant == "tables with byte-order marks joined":  # cat of two files saved as Excel's "CSV UTF-8"
        lines = ["\ufeff" + HEADER, *ROWS[:2], "\ufeff" + HEADER, "\ufeff" + ROWS[2], ROWS[3]]
    elif variant == "assembly101's flag words":
        lines = ["video,step,start,end,mistake", *(row + ",correct" for row in ROWS)]
    elif variant == "a step of two lines":  # a cell of two lines (Alt+Enter), the second listing things
        lines = [HEADER, '"run1","unfold, then:\nspread, flatten, align, stake",1.5,10', *ROWS[1:]]
        expected = {"run1": [("unfold, then:\nspread, flatten, align, stake", 1.5, 10.0), *EXPECTED["run1"][1:]],
                    "run2": EXPECTED["run2"]}
    elif variant == "pandas' numbered columns":  # DataFrame(rows).to_csv(index=False): read as a segment of '0'
        lines = ["0,1,2,3", *ROWS]
    elif variant == "pandas' numbered columns and index":  # DataFrame(rows).to_csv()
        lines = [",0,1,2,3,4", *(f"{k},{row},no" for k, row in enumerate(ROWS))]
    elif variant == "comments and blank lines":
        lines = ["# labelled by hand", HEADER, ROWS[0], "", ROWS[1], " , , , ", *ROWS[2:]]
    assert spans(write(tmp_path, lines, name, newline, encoding)) == expected


def test_a_scenario_option_on_a_table_without_one_says_what_to_do(tmp_path: Path) -> None:
    path = write(tmp_path, [HEADER, *ROWS])
    with pytest.raises(InputError, match=r"tent\.csv: a table without a scenario column holds one scenario, "
                                         r"'procedure': leave --scenario out, or add a scenario column naming 'tent'$"):
        load_annotations(path, scenario_read="tent", scenario_required=True)
    assert set(load_annotations(path, scenario_read="procedure", scenario_required=True).taxonomy) == {"procedure"}


def test_has_errors_and_scenario_columns(tmp_path: Path) -> None:
    path = write(tmp_path, ["video,step,start,end,has_errors,scenario", "run1,unfold,0,5,,tent",
                            "run1,insert_pole,6,9,yes,tent", "x1,fold,0,4,0,other"])
    ann = load_annotations(path)
    assert ann.videos["run1"].has_errors == (False, True) and ann.videos["x1"].scenario == "other"
    assert set(ann.taxonomy) == {"tent", "other"}


@pytest.mark.parametrize(("lines", "message"), [
    ([HEADER, ROWS[0], "run1,unfold,abc,5"],
     "line 3: start = 'abc' is not a time (seconds, such as 65.5, or m:ss, such as 1:05.5)"),
    ([HEADER, "run1,unfold,1:75,2:00"], "line 2: start = '1:75' is not a time"),
    ([HEADER, ROWS[0], "run1,unfold,3"], "line 3: 3 fields, no end (expected video,step,start,end"),
    ([HEADER, "run1,unfold,30,5"], "line 2: the segment ends at 5 s, before it starts (30 s)"),
    ([HEADER, "run1,unfold,5,5"], "line 2: the segment ends at 5 s, when it starts (5 s)"),
    ([HEADER, "run1,unfold,-2,5"], "line 2: a time below zero (-2 .. 5 s)"),
    ([HEADER, ",unfold,1,5"], "line 2: the video field is empty"),
    ([HEADER, "run1, ,1,5"], "line 2: step "),
    (["recording,what,t0,t1", *ROWS], "line 1: the header names no step and no start and no end column"),
    ([HEADER, ROWS[0], "run2,Insert Pole,1,5", "run2,insert_pole,6,7"],
     "line 4: step 'insert_pole' is step 'Insert Pole' of line 3 written another way"),
    ([HEADER, "run1,add salt, pepper,1,5"], "line 2: 5 fields, the header has 4: a step name holding the separator"),
    (["video,step,start,end,has_errors", "run1,unfold,1,5,maybe"],
     "line 2: has_errors = 'maybe' is not true or false (1/0, yes/no, mistake/correct, or empty)"),
    ([HEADER], ": no segment rows"),
    (["video,step,start,end,end", "run1,unfold,1,5,5000"],
     "line 1: the header names the end twice, 'end' (column 4) and 'end' (column 5): rename or remove one, so that "
     "one column holds the end in seconds"),
    (["video,step,Start (frame),Start (s),end", "run1,unfold,30,1,5"],
     "line 1: the header names the start twice, 'Start (frame)' (column 3) and 'Start (s)' (column 4)"),
    (["clip,what,t0,t1", *ROWS], "line 1: neither a header naming the columns video,step,start,end nor a segment row"),
    ([HEADER, 'run1,"unfold,1,5', "run1,insert_pole,6,9", "run2,unfold,1,5"],
     "line 2: a field holds lines that read as rows of their own (the row runs from line 2 to line 4: is a double "
     "quote on line 2 never closed?)"),
    ([HEADER, 'run1,"unfold,1,5', "run1,insert_pole,6,9", 'run2,"stake",1,5'], "line 2: a field holds lines"),
    ([HEADER, ROWS[0], 'run1,"unfold,1,5', *(f"run{k},insert_pole,6,9" for k in range(10000))],
     "line 3: a field runs on past 131072 characters: is a double quote on line 3 never closed?"),
    ([HEADER, "run1,unfold,1,5,5,9"], "a time holding a decimal comma (1,5) must be written with a point (1.5)"),
    (["run1,unfold,1,5,9"], "line 1: has_errors = '9' is not true or false: are the fields shifted?"),
    ([HEADER, 'run1,unfold,"1,5",9'], "start = '1,5' is not a time (seconds, such as 65.5, or m:ss, such as "
                                      "1:05.5); with a point, not a decimal comma: 1.5"),
])
def test_a_bad_row_is_named_by_its_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = write(tmp_path, lines)
    with pytest.raises(InputError) as refused:
        load_annotations(path)
    assert str(refused.value).startswith(f"{path}")
    assert message in str(refused.value)


def test_a_table_not_named_csv_is_told_how_it_is_read(tmp_path: Path) -> None:
    path = write(tmp_path, [HEADER, *ROWS], name="labels.txt")
    with pytest.raises(InputError, match=r"labels\.txt: not JSON; it reads as a table: name it \.csv"):
        load_annotations(path)
    (tmp_path / "bad.json").write_text("{oops")  # a broken JSON file keeps its own line
    with pytest.raises(InputError, match="invalid JSON at line 1 column 2"):
        load_annotations(tmp_path / "bad.json")


def test_a_clock_time_in_the_json_says_it_must_be_seconds(tmp_path: Path) -> None:
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"taxonomy": {"tent": {"0": {"id": 0, "name": "unfold"}}}, "annotations": {"run1": {
        "scenario": "tent", "segments": [{"step_id": 0, "start_time": "1:05.5", "end_time": 70}]}}}))
    with pytest.raises(InputError, match=r'start_time = "1:05.5" is not a number \(write "1:05.5" as the number '
                                         r"of seconds, 65.5\)$"):
        load_annotations(path)


def test_a_table_not_in_utf8_names_its_line(tmp_path: Path) -> None:
    # Excel's plain "CSV" is Windows-1252 on most Windows systems: the line said only "not UTF-8 text".
    path = write(tmp_path, [HEADER, ROWS[0], "run1,sauté,12,20"], encoding="cp1252")
    with pytest.raises(InputError, match=r"tent\.csv line 3: not UTF-8 text \(in Windows-1252 it reads "
                                         r"'run1,sauté,12,20'\): save the table as UTF-8 \(Excel: \"CSV UTF-8\"\)$"):
        load_annotations(path)
    path = write(tmp_path, [HEADER, ROWS[0], "run1,sauté,12,20"], encoding="utf-16")
    assert load_annotations(path).taxonomy == {"procedure": {0: "sauté", 1: "unfold"}}


def test_excels_unicode_text_under_txt_is_told_to_be_renamed(tmp_path: Path) -> None:
    path = write(tmp_path, [line.replace(",", "\t") for line in [HEADER, *ROWS]], name="labels.txt",
                 encoding="utf-16")
    with pytest.raises(InputError, match=r"labels\.txt: not JSON; it reads as a table: name it \.csv"):
        load_annotations(path)


def test_order_only_reads_a_table_as_it_reads_the_json(tmp_path: Path) -> None:
    # --order-only reads a JSON file's segments without checking their times; the table's were checked all the same.
    path = write(tmp_path, [HEADER, "run1,unfold,9,3", "run1,insert_pole,12,20"])
    ann = load_annotations(path, check_times=False)
    assert [ann.taxonomy["procedure"][step] for step in ann.videos["run1"].steps] == ["unfold", "insert_pole"]
    with pytest.raises(InputError, match="line 2: the segment ends at 3 s, before it starts"):
        load_annotations(path)


@pytest.mark.parametrize("typo", ["insert_pol", "isnert_pole", "insert_poel", "insert_pole2", "insert_pome"])
def test_a_step_mistyped_in_one_row_is_warned_of(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  typo: str) -> None:
    # A typo made a step of its own: a detector class and a graph node, and 'insert_pole' missing from run3.
    rows = [*ROWS, "run3,unfold,0,8", f"run3,{typo},9,15"]
    path = write(tmp_path, [HEADER, *rows])
    ann = load_annotations(path)
    assert sorted(ann.taxonomy["procedure"].values()) == sorted([typo, "insert_pole", "unfold"])  # still accepted
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert (f"warning: {path}: step '{typo}' (video 'run3' only) looks like 'insert_pole' mistyped (in 2 other "
            "videos, not that one)") in err
    # Read again for the order alone (tgml train's learner, after the command's own read): said once, not twice.
    load_annotations(path, check_times=False)
    assert "warning:" not in capsys.readouterr().err


@pytest.mark.parametrize("rows", [
    (*ROWS, "run3,unfold,0,8", "run3,insert_pole,9,15", "run3,insert_poles,16,18"),  # both in one video: two steps
    (*ROWS, "run3,unfold,0,8", "run3,attach_fly,9,15"),  # a step of its own, not one typo from another
    ("run1,pole,0,5", "run2,pole,0,5", "run3,hole,0,5"),  # short names are often this close
    ("run1,cut1,0,5", "run1,cut2,6,9", "run2,cut1,0,5", "run2,cut2,6,9", "run3,cut3,0,5"),  # numbered steps
])
def test_steps_named_apart_are_not_warned_of(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             rows: tuple[str, ...]) -> None:
    load_annotations(write(tmp_path, [HEADER, *rows]))
    assert "warning:" not in capsys.readouterr().err
