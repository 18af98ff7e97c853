"""Printing and saving `prego-bench` results: rich tables, the noise-ablation plot, the JSON file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from graphs.common.files import save_figure, write_text
from graphs.precision_recall import NOT_MEASURED, shown
from tgml.bench.fitted_table import FittedTable
from tgml.bench.prego.data import MODE_MARKS
from tgml.bench.prego.published import PUBLISHED, published_best
from tgml.bench.prego.scoring import METRIC_KEYS

TRUE_PR_NOTE: Final = "P/R are true precision / recall."
# Said only under a table that shows a published row: a user's own data has none, and the footnote then spoke of
# tables that were not there.
SWAP_NOTE: Final = (
    "The published tables list them swapped (the reference scores predictions as if they were ground truth), so "
    "their 'Prec' is our recall and vice versa; F1 is unaffected."
)
NOT_PUBLISHED: Final = "–"  # en dash: a figure the paper does not give (a hyphen is one not measured)
DASH_NOTES: Final = {NOT_PUBLISHED: f"{NOT_PUBLISHED}: not published.",
                     NOT_MEASURED: f"{NOT_MEASURED}: not measured (nothing to count: a precision without an alert)."}


# The paper's marks for the two modes, which the tables keep: said once under each table that shows them.
MODE_NOTES: Final = {"gt": f"gt {MODE_MARKS['gt']}: the annotated key-steps.",
                     "pred": f"pred {MODE_MARKS['pred']}: the key-steps a MiniROAD detector recognised."}


def _dash_legend(table: Any) -> str:
    """What the dashes and mode marks that ``table`` shows mean, one sentence per one shown ("" when none is)."""
    shown_cells = {word for column in table.columns for cell in column.cells for word in str(cell).split()}
    notes = {**MODE_NOTES, **DASH_NOTES}
    return " ".join(note for word, note in notes.items() if word in shown_cells)


def _cell(mean: float | None, std: float | None, seeded: bool) -> str:
    return f"{shown(mean)} ± {shown(std)}" if seeded and mean is not None else shown(mean)


def result_tables(result: Mapping[str, Any]) -> list[Any]:
    """One table per dataset: every method and mode, mean ± std over seeds, the published row beside it.

    Args:
        result: a `run_benchmark` result document.

    Returns:
        One `tgml.bench.fitted_table.FittedTable` per dataset: a terminal too narrow for the table gets it
        narrowed or as lines, never with a figure cut or split.
    """
    from rich.markup import escape
    from rich.table import Table

    tables = []
    own = result["settings"].get("annotations")
    for dataset, modes in result["results"].items():
        caption = f"{TRUE_PR_NOTE} {SWAP_NOTE}" if own is None else TRUE_PR_NOTE  # own data: no published row
        if own is not None:
            whole = len(own["correct_test_videos"])
            verb = "is" if whole == 1 else "are"
            caption += (f" Scenario {escape(dataset)} of {escape(own['file'])}: test videos are cut right after their "
                        f"first segment with has_errors: true; {whole} without one {verb} kept whole, all steps "
                        "correct.")
        seeds = result["settings"].get("seeds")
        spread = f"seed {seeds[0]}" if isinstance(seeds, list) and len(seeds) == 1 else "mean ± std over seeds"
        table = Table(
            title=f"PREGO online mistake detection — {escape(dataset)} ({spread})",
            caption=caption,
            caption_justify="left",
        )
        table.add_column("method")
        table.add_column("mode")
        for header in ("Avg F1", "Corr F1", "Corr P", "Corr R", "Mist F1", "Mist P", "Mist R"):
            table.add_column(header, justify="right")
        methods = list(dict.fromkeys(m for mode in modes.values() for m in mode))
        for method in methods:
            for mode, entries in modes.items():
                if method not in entries:  # "<method> + probabilistic" is a PRED-mode row only
                    continue
                entry = entries[method]
                seeded = len(entry["per_seed"]) > 1
                # Seeds that all score alike (noisy-AND: the seed only jitters a constant start; DO at beta 0.5 on
                # Assembly101-O) are said to, not shown as a spread of 0.0 over n runs that reads as stability.
                first = entry["per_seed"][0].get("scores") if seeded else None
                alike = first is not None and all(run.get("scores") == first for run in entry["per_seed"])
                label = (f"{method} (n={len(entry['per_seed'])}{', all alike' if alike else ''})" if seeded
                         else method)
                mark = MODE_MARKS[mode]
                table.add_row(
                    escape(label),  # "graph:<file name>" is the user's text, not rich markup
                    f"{mode} {mark}",
                    *(_cell(entry["mean"][k], entry["std"][k], seeded) for k in METRIC_KEYS),
                )
                published = entry["published"]
                if published is not None:
                    table.add_row(
                        "  published",
                        f"{mode} {mark}",
                        f"{published['avg_f1']:.1f}",
                        f"{published['correct_f1']:.1f}",
                        NOT_PUBLISHED,
                        NOT_PUBLISHED,
                        f"{published['mistake_f1']:.1f}",
                        NOT_PUBLISHED,
                        NOT_PUBLISHED,
                        style="dim",
                    )
            table.add_section()
        if own is not None:  # a dataset of the user's: the paper has no figures for it
            tables.append(_with_legend(table))
            continue
        # The paper's other rows (PREGO itself, TGT-text, ...) are printed too, so the table is the paper's.
        for method in (m for m in PUBLISHED[dataset][next(iter(modes))] if m not in methods):
            for mode in modes:
                row = PUBLISHED[dataset][mode][method]
                table.add_row(f"{method}, published only", f"{mode} {MODE_MARKS[mode]}", f"{row[0]:.1f}",
                              f"{row[1]:.1f}", *[NOT_PUBLISHED] * 2, f"{row[2]:.1f}", *[NOT_PUBLISHED] * 2,
                              style="dim")
        for mode in modes:
            best = published_best(dataset, mode)
            table.add_row(
                "best published", f"{mode} {MODE_MARKS[mode]}", f"{best:.1f}", *([""] * 6), style="dim italic"
            )
        tables.append(_with_legend(table))
    return tables


def _with_legend(table: Any) -> FittedTable:
    """``table`` with the meaning of its dashes after its caption, fitted to the terminal (`FittedTable`)."""
    legend = _dash_legend(table)
    if legend:
        table.caption = f"{table.caption} {legend}" if table.caption else legend
    return FittedTable(table)


def perturbation_tables(result: Mapping[str, Any]) -> list[Any]:
    """Tables of the noise ablation: Avg / Correct / Mistake F1 per rate, one table per dataset and mode (each a
    `FittedTable`: a figure is never cut or split over two lines)."""
    from rich.markup import escape
    from rich.table import Table

    tables = []
    for dataset, modes in result.get("perturb", {}).items():
        for mode, methods in modes.items():
            table = Table(title=f"Noise ablation — {dataset}, {mode} {MODE_MARKS[mode]} (Avg / Correct / Mistake F1)")
            table.add_column("method")
            rates = [point["rate"] for point in next(iter(methods.values()))]
            for rate in rates:
                table.add_column(f"p={rate:g}", justify="right")
            for method, curve in methods.items():
                table.add_row(
                    escape(method),
                    *(
                        " / ".join(shown(p["mean"][key]) for key in ("avg_f1", "correct_f1", "mistake_f1"))
                        for p in curve
                    ),
                )
            tables.append(_with_legend(table))
    return tables


def plot_perturbation(result: Mapping[str, Any], path: str | Path) -> Path | None:
    """Save the noise ablation as a PNG (Avg / Correct / Mistake F1 against the rate), if matplotlib is installed.

    Args:
        result: a `run_benchmark` result with a ``perturb`` section.
        path: PNG file to write.

    Returns:
        The file written, or None when matplotlib is not installed (it is the optional ``plot`` extra).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never open a window
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    panels = [(d, m, methods) for d, modes in result.get("perturb", {}).items() for m, methods in modes.items()]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (dataset, mode, methods) in zip(axes[0], panels, strict=True):
        for method, curve in methods.items():
            rates = [p["rate"] for p in curve]
            for key, style in (("avg_f1", "-"), ("correct_f1", "--"), ("mistake_f1", ":")):
                label = f"{method} {key.removesuffix('_f1')}"
                ax.plot(rates, [p["mean"][key] for p in curve], style, marker="o", label=label)
        ax.set_title(f"{dataset} {mode} {MODE_MARKS[mode]}")
        ax.set_xlabel("perturbation rate p")
        ax.set_ylabel("F1 (%)")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        return save_figure(fig, path, "ablation plot", dpi=120)
    finally:
        plt.close(fig)


def write_results(result: Mapping[str, Any], path: str | Path) -> Path:
    """Write a result document as indented JSON, atomically (parent folder created; failures are `InputError`)."""
    import json

    return write_text(path, json.dumps(result, indent=2) + "\n", "results file")

