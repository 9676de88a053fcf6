"""A Hugging Face Hub id (`org/name`) read from the local Hugging Face cache, never the network.

`count`, `print`, `build` and `import-hf` accept a Hub id wherever they accept a config.json;
huggingface_hub's own cache lookup (`try_to_load_from_cache`) finds the config.json a
download left in the cache (`HF_HUB_CACHE`, else `HF_HOME`/hub, else ~/.cache/huggingface/hub,
read when the command runs). A Hub id not cached is an error saying where archspec looked.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from archspec.errors import SpecError

# huggingface_hub's repo id: a namespace and a name, each of letters, digits, - _ . (a path
# with more parts, or one ending in a spec's or a config's suffix, is a file).
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def looks_like_hub_id(ref: str) -> bool:
    """`org/name`, and no file or folder of that name here (a path wins)."""
    return (
        _HUB_ID.fullmatch(ref) is not None
        and not ref.endswith(_FILE_SUFFIXES)
        and ".." not in ref
        and not Path(ref).exists()
    )


def cache_dir() -> Path:
    """The Hub cache huggingface_hub would use now: HF_HUB_CACHE, else HF_HOME/hub, else
    ~/.cache/huggingface/hub (XDG_CACHE_HOME/huggingface/hub when that is set)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(xdg).expanduser() / "huggingface" / "hub"


def hub_source(hub_id: str) -> str:
    """Where the config.json of a Hub id comes from, for the spec's `source`."""
    return f"https://huggingface.co/{hub_id}/blob/main/config.json"


def cached_config(hub_id: str) -> Path:
    """The cached config.json of `hub_id` (its `main` revision, as huggingface_hub resolves
    it), or a SpecError saying where it looked."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        raise SpecError(
            f"{hub_id!r} looks like a Hugging Face Hub id; reading it from the local cache "
            "needs huggingface_hub",
            hint="pip install huggingface_hub (transformers installs it), or pass the path of "
            "a config.json",
        ) from None
    folder = cache_dir()
    try:
        found = try_to_load_from_cache(hub_id, "config.json", cache_dir=folder)
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(hub_id, folder, exc) from None
    if not isinstance(found, str):
        raise SpecError(
            f"Hugging Face Hub id {hub_id!r} is not in the local cache: no config.json for it "
            f"under {folder} (archspec never downloads)",
            hint=f"download it with `hf download {hub_id} config.json` (HF_HUB_CACHE or "
            "HF_HOME name another cache), or pass the path of a config.json",
        )
    return Path(found)


def _unreadable(hub_id: str, folder: Path, exc: OSError | UnicodeDecodeError) -> SpecError:
    """The lookup reads the cache's refs/main as text (the commit its snapshot is named
    after): a file of other bytes, or one it may not read, names the file to fix."""
    repo = folder / ("models--" + hub_id.replace("/", "--"))
    where = getattr(exc, "filename", None) or repo / "refs" / "main"
    if isinstance(exc, UnicodeDecodeError):
        why = "is not UTF-8 text"
    else:
        why = f"cannot be read ({exc.strerror or exc})"
    return SpecError(
        f"cannot read Hugging Face Hub id {hub_id!r} from the local cache: {where} {why}",
        hint=f"remove that file and download {hub_id} again (`hf download {hub_id} "
        "config.json`), or pass the path of a config.json",
    )
