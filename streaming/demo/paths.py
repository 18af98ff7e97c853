"""What ``--video demo`` stands for: the bundled demo graph and detector, and demo names mapped to video files.

``demo`` plays the mistake execution, ``demo:<name>`` any of `streaming.demo.procedure.DEMO_EXECUTIONS`;
the videos are rendered on first use into the cache of `streaming.demo.synthetic_video`. The bundled
files are rebuilt by ``python tools/build_demo.py``.
"""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent


def default_demo_paths() -> tuple[Path, Path]:
    """The bundled demo graph and demo detector shipped in ``streaming/demo/``.

    Returns:
        ``(demo_graph.json, demo_detector.pt)``.
    """
    return DEMO_DIR / "demo_graph.json", DEMO_DIR / "demo_detector.pt"


def is_demo_video(video: str) -> bool:
    """Whether a ``--video`` value names a demo video (``demo`` or ``demo:<name>``) rather than a real source."""
    return video == "demo" or video.startswith("demo:")


def resolve_video(video: str) -> str:
    """Map ``demo`` / ``demo:<name>`` to the cached demo video file (rendered on first use); else unchanged.

    Args:
        video: a ``--video`` value.

    Returns:
        A camera, URL or file the readers open.

    Raises:
        InputError: an unknown demo name, or a cache that cannot be written.
    """
    if not is_demo_video(video):
        return video
    # The renderer (OpenCV, and torch through the segmenter's run-length encoding) loads only for a demo.
    from streaming.demo.synthetic_video import demo_video

    return str(demo_video(video.partition(":")[2] if ":" in video else "mistake")[0])
