"""`--plot`: real images (checked by header, size and by rendering them back), and a clear
message when matplotlib, an optional extra, is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.backends.compare.plot import human
from archspec.cli import app

runner = CliRunner()
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_human_numbers_for_axes() -> None:
    assert [human(n) for n in (0, 512, 1_200, 350e6, 1.2e9, 6.738e9, 2e12)] == [
        "0",
        "512",
        "1.2K",
        "350M",
        "1.2B",
        "6.74B",
        "2T",
    ]


def test_compare_png_is_a_real_image(tmp_path: Path) -> None:
    image = pytest.importorskip("matplotlib.image")
    path = tmp_path / "compare.png"
    result = runner.invoke(
        app, ["compare", "bert-base", "llama-2-7b", "mixtral-8x7b", "--plot", str(path)]
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {path}" in result.stderr.replace("\n", "")
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    # The IHDR chunk: width and height, big-endian, right after the signature.
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 1000 and height >= 800  # two rows: the bars and the FLOPs chart
    pixels = image.imread(path)  # renders it back: a corrupt file raises here
    assert pixels.shape[:2] == (height, width)
    assert pixels.std() > 0.05  # not a blank canvas
    assert len(data) > 20_000


def test_compare_svg(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "compare.svg"
    result = runner.invoke(app, ["compare", "gpt2", "t5-small", "--plot", str(path)])
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert "<svg" in text
    for label in ("Parameters by component", "gpt2", "t5-small", "attention", "Forward FLOPs"):
        assert label in text


def check_png(path: Path, min_width: int = 1000) -> None:
    image = pytest.importorskip("matplotlib.image")
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= min_width and height >= 300
    pixels = image.imread(path)
    assert pixels.shape[:2] == (height, width) and pixels.std() > 0.05


def test_count_sweep_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "sweep.png"
    result = runner.invoke(
        app, ["count", "llama-2-7b", "--seq", "512,1024,2048,4096", "--plot", str(path)]
    )
    assert result.exit_code == 0, result.output
    check_png(path)
    # Without a list, --plot sweeps the doublings up to the context window.
    default = tmp_path / "default.svg"
    result = runner.invoke(app, ["count", "gpt2", "--plot", str(default)])
    assert result.exit_code == 0, result.output
    text = default.read_text()
    assert "FLOPs per token" in text and "KV cache (inference)" in text


def test_a_context_past_2_to_the_29_is_charted_up_to_the_size_limit(tmp_path: Path) -> None:
    """The doubling after 536,870,912 is past the 10**9 any --seq may be: the sweep stops
    there, so a valid spec of a longer context is charted, not refused."""
    from archspec.backends.compare.sweep import chart_lengths
    from archspec.safety.limits import MAX_SIZE

    assert chart_lengths(600_000_000)[-2:] == [2**29, MAX_SIZE]
    assert chart_lengths(MAX_SIZE)[-1] == MAX_SIZE and chart_lengths(1024)[-1] == 1024
    pytest.importorskip("matplotlib")
    spec = tmp_path / "longctx.yaml"
    spec.write_text("extends: gpt2\nn_layers: 2\nposition: {kind: rope}\nmax_seq_len: 600000000\n")
    for command in (["compare", str(spec)], ["count", str(spec)]):
        path = tmp_path / f"{command[0]}.svg"
        result = runner.invoke(app, [*command, "--plot", str(path)])
        assert result.exit_code == 0, result.output
        assert "<svg" in path.read_text()


def test_plot_refuses_other_formats_and_missing_folders(tmp_path: Path) -> None:
    for bad in ("chart.pdf", str(tmp_path / "no-such-dir" / "chart.png")):
        result = runner.invoke(app, ["compare", "gpt2", "--plot", bad])
        assert result.exit_code == 2
        assert "error:" in result.stderr


def test_without_matplotlib_says_how_to_get_it(tmp_path: Path) -> None:
    # `sys.modules["matplotlib"] = None` makes `import matplotlib` fail as if not installed.
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from archspec.cli import main\n"
        f"sys.argv = ['archspec', 'compare', 'gpt2', '--plot', {str(tmp_path / 'c.png')!r}]\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "needs matplotlib" in result.stderr
    assert "pip install 'archspec[plot]'" in result.stderr
    assert not (tmp_path / "c.png").exists()


def test_sweep_chart_axes_cover_the_data(tmp_path: Path) -> None:
    """Every point lies between two labelled ticks: the forward line (13.5-15.4G) above the
    lowest FLOPs label, the training total (104-154 GiB) below the top memory label."""
    from archspec.backends.compare.ticks import binary_ticks, decimal_ticks

    pytest.importorskip("matplotlib")
    path = tmp_path / "sweep.svg"
    args = ["count", "llama-2-7b", "--seq", "512,1024,2048,4096", "--plot", str(path)]
    assert runner.invoke(app, args).exit_code == 0
    text = path.read_text()
    assert "10G" in text and "50G" in text  # 13.5G-46G between them
    assert "256 GiB" in text  # the training total reaches 144 GiB at 4K
    for lo, hi in ((13.5e9, 15.4e9), (2.5e8, 4.3e10), (1e3, 1.1e3)):
        ticks = decimal_ticks(lo, hi)
        assert ticks[0] <= lo and ticks[-1] >= hi
    for lo, hi in ((104 * 2**30, 154 * 2**30), (2**29, 2**37), (3e5, 7e11)):
        ticks = binary_ticks(lo, hi)
        assert ticks[0] <= lo and ticks[-1] >= hi and len(ticks) <= 10
